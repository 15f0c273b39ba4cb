"""The statement-only screens (docs/answers.md): valid queries whose clean answer is wrong whatever
the data holds (a NULL comparison, NOT IN over a NULL, integer division of counts, sum/avg of
DISTINCT values, count(*) over a LEFT JOIN's unmatched rows, a timestamp range cut at midnight, a
WHERE condition that makes a LEFT JOIN inner), over the corpus's shop schema (answerscorpus.py).

Each silent failure of these codes must come with a hint that is the corrected statement: it runs,
and pgwarden does not flag it again with the same code. test_answers_corpus.py counts the corpus
as a whole (every code, correct queries included)."""

import pytest

import answerscorpus as corpus

# The codes whose hint is the whole statement corrected.
CODES = {"NULL_COMPARISON", "NOT_IN_NULL", "INTEGER_DIVISION", "DISTINCT_MEASURE",
         "OUTER_JOIN_COUNT", "TIMESTAMP_DATE_BOUND", "LEFT_JOIN_FILTERED", "FOREIGN_KEY_MISMATCH",
         "SOFT_DELETED_ROWS"}
SILENT = [c for c in corpus.SILENT if c.code in CODES and c.flagged]


shop = pytest.fixture(scope="module", name="shop")(corpus.shop)


@pytest.mark.parametrize("case", SILENT, ids=[c.sql[:60] for c in SILENT])
def test_silent_failure_is_flagged_with_a_runnable_correction(shop, case):
    with shop.raw() as c:
        c.login("core", shop.passwords["core"])
        codes, hints, _ = corpus.ask(c, case.sql)
        assert case.code in codes, (case.sql, codes)
        hint = hints[case.code]
        assert hint and hint != case.sql, (case.sql, hint)
        # The correction runs, and is not flagged again with the same code.
        again, _, _ = corpus.ask(c, hint)
        assert case.code not in again, (hint, again)


def test_the_same_warning_over_the_extended_protocol(shop):
    with shop.raw() as c:
        c.login("core", shop.passwords["core"])
        codes, hints, _ = corpus.ask(c, "SELECT count(*) FROM sq_customers WHERE country = NULL", extended=True)
        assert "NULL_COMPARISON" in codes
        assert hints["NULL_COMPARISON"] == "SELECT count(*) FROM sq_customers WHERE country IS NULL"
