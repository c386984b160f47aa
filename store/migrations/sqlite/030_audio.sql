-- 030: audio facts (store/audio.go). A version may carry a clip besides its
-- description (value): its MIME type, size in bytes, length in ms, whether
-- Alexa's SSML <audio> plays it, and the bytes — sealed like the value, with
-- the same AAD, when sealed = 1 (P-6). audio_sha256 is the digest of the
-- plaintext bytes (what a reader compares a re-recording by; the chain hash
-- covers it, and Verify recomputes it from the bytes). The chain hash covers
-- the bytes (P-5, AudioVersionHash). A text-only version has audio_type ''
-- and audio NULL.
ALTER TABLE versions ADD COLUMN audio_type  TEXT    NOT NULL DEFAULT '';
ALTER TABLE versions ADD COLUMN audio_size  INTEGER NOT NULL DEFAULT 0;
ALTER TABLE versions ADD COLUMN audio_ms    INTEGER NOT NULL DEFAULT 0;
ALTER TABLE versions ADD COLUMN audio_sha256 TEXT   NOT NULL DEFAULT '';
ALTER TABLE versions ADD COLUMN audio_alexa INTEGER NOT NULL DEFAULT 0;
ALTER TABLE versions ADD COLUMN audio       BLOB;
