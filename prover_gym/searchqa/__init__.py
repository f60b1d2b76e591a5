"""Search-QA in the Search-R1 setting: search a corpus, then answer; reward is exact match."""
