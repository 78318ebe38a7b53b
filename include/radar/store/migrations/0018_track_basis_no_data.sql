-- Like against like: a backward-adjusted stock or ETF (dividends reinvested) is measured against the CSI 300's
-- total-return series (CSI:H00300), not its price index, whose excess returns were biased upward by the
-- index's dividend yield. Picks already on record are moved to it and computed again by the next run (their
-- outcomes are dropped here; the step writes them back from the cached prices and one fetch of the series).
-- An index measured against the CSI 300 stays on the price index (neither counts dividends).
UPDATE track_pick SET benchmark = 'CSI:H00300', benchmark_name = '沪深300全收益', updated_at = now()
WHERE benchmark = 'SH:000300' AND instrument !~ '^(SW|HKI|CSI):|^SH:000|^SZ:399';
DELETE FROM track_outcome o USING track_pick p WHERE o.pick_id = p.id AND p.benchmark = 'CSI:H00300';

-- A pick whose data the source still lacks a stated time later is "no data" for good: the day the step stopped
-- asking for it (its horizons keep their no-data rows and stay in the record's denominators). NULL: still open.
ALTER TABLE track_pick ADD COLUMN no_data_final date;
