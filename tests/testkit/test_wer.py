from testkit.wer import wer


def test_word_errors_ignore_case_and_punctuation() -> None:
    assert wer("Where is my order?", "where is my order") == (0, 4)
    assert wer("Where's my order?", "wheres my border") == (1, 3)
    assert wer("when are you open", "when you open on sunday") == (3, 4)
    assert wer("", "noise") == (1, 0)
