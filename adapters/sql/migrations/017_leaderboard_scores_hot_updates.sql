-- Cheaper score updates (issue 19, fourth pass). Every pipeline batch upserts a row of
-- leaderboard_scores per (event, matching board), and the order index (tenant, board, window,
-- score DESC, tiebreak, user_id) contained the score: every update of a score inserted a new entry
-- into all three indexes. Without it, an update changes no indexed column (a user's partition
-- never changes), so Postgres updates the row in place on its page (a HOT update) and touches no
-- index at all. Measured on PGlite (3,000-row upserts into a 300,000-row table, medians of 30):
-- 54-69 µs per row with the order index, 24-36 µs without; docs/performance.md "fourth pass".
--
-- What the order index served, and how it is served now: open windows are read from the rank
-- index, never from this table. Closed windows (history reads, the final standings at close) sort
-- the window's rows with a top-N sort over the primary key's range of the window; those reads
-- already counted every row of the window (countEntries, positionOf), so they stay one scan of the
-- window (docs/leaderboards.md "Reading closed windows").
--
-- A lower fill factor leaves room on each page for the new version of a row, which a HOT update
-- needs; it applies to pages written from now on.
DROP INDEX IF EXISTS leaderboard_scores_order;
ALTER TABLE leaderboard_scores SET (fillfactor = 80);
