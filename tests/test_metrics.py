import pytest

from prover_gym.searchqa.metrics import cover_exact_match, exact_match, f1_score, normalize_answer


@pytest.mark.parametrize(
    "raw, norm",
    [
        ("The Eiffel Tower", "eiffel tower"),
        ("  A   cat, an apple & THE dog! ", "cat apple dog"),
        ("U.S.A.", "usa"),
        ("the theory", "theory"),  # 'the' is removed only as a whole word
        ("Anthem", "anthem"),
        ("Röntgen", "röntgen"),  # accents stay
        ("1,921", "1921"),
        ("“quoted”", "“quoted”"),  # non-ASCII punctuation stays
        ("en–dash", "en–dash"),
        ("", ""),
        ("a an the", ""),
    ],
)
def test_normalize_answer(raw, norm):
    assert normalize_answer(raw) == norm


def test_exact_match_any_gold_and_bare_string():
    assert exact_match("the Beijing.", ["Shanghai", "beijing"]) == 1.0
    assert exact_match("Beijing", "beijing") == 1.0
    assert exact_match("Beijing city", ["Beijing"]) == 0.0
    assert exact_match("Rontgen", ["Röntgen"]) == 0.0


def test_cover_em_is_substring():
    assert cover_exact_match("it is Beijing city", ["beijing"]) == 1.0
    assert cover_exact_match("Bei", ["beijing"]) == 0.0


def test_f1_values():
    assert f1_score("new york city", ["New York"]) == pytest.approx(2 * (2 / 3) * 1 / (2 / 3 + 1))
    assert f1_score("paris", ["london"]) == 0.0
    assert f1_score("x y", ["z", "x y"]) == 1.0
    # FlashRAG special case: yes/no/noanswer must match exactly
    assert f1_score("yes", ["no"]) == 0.0
    assert f1_score("yes it is", ["yes"]) == 0.0
    assert f1_score("no", ["no"]) == 1.0
