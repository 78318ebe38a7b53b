-- Issue 14 (trust): each analysis's evidence quotes checked against its article, and score/flag
-- contradictions resolved; result_json.checks holds the details (quotes with their place and context).
-- evidence_verified: at least one quote was found in the article (NULL: analysed before the check existed).
-- An analysis without a verified quote never triggers a push and ranks below the verified ones.
ALTER TABLE analysis_result ADD COLUMN evidence_verified boolean;
ALTER TABLE analysis_result ADD COLUMN consistency_note text;
