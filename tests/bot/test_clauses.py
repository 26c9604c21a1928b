from bot.pipeline.language.clauses import ClauseSplitter, clean_for_speech


def feed_all(pieces: list[str]) -> list[str]:
    splitter = ClauseSplitter()
    out: list[str] = []
    for piece in pieces:
        out += splitter.feed(piece)
    tail = splitter.flush()
    return [*out, tail] if tail else out


def test_first_clause_is_cut_at_the_first_comma() -> None:
    pieces = ["Sure", ",", " your order", " ships today", ". It should", " arrive Monday."]
    assert feed_all(pieces) == ["Sure,", "your order ships today.", "It should arrive Monday."]


def test_later_commas_wait_for_enough_words() -> None:
    text = "Yes, we open at nine, close at five, and on Sunday we rest all day long, sadly."
    out = feed_all([c + " " for c in text.split(" ")])
    assert out[0] == "Yes,"
    assert "we open at nine, close at five, and on Sunday we rest all day long," in out
    assert " ".join(out) == text


def test_markup_is_not_spoken() -> None:
    assert clean_for_speech("**Hello** _there_ #1") == "Hello there 1"
    assert feed_all(["* Item one.", " * Item two"]) == ["Item one.", "Item two"]


def test_nothing_in_nothing_out() -> None:
    assert feed_all([]) == []
    assert feed_all(["  ", "**"]) == []
