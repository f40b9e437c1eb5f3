-- Reel's metadata database (PostgreSQL 13 or newer). docs/METADATA.md explains it.
-- REPLICA IDENTITY FULL: an update that leaves a large (TOASTed) value unchanged still
-- carries it to the change log.

CREATE TABLE IF NOT EXISTS episodes (
    episode_id  text PRIMARY KEY,
    status      text NOT NULL DEFAULT 'recorded',
    robot       text,
    operator    text,
    site        text,
    recorded_at timestamptz,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE episodes REPLICA IDENTITY FULL;

CREATE TABLE IF NOT EXISTS annotations (
    episode_id  text NOT NULL,
    key         text NOT NULL,
    value       text,
    author      text,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (episode_id, key)
);
ALTER TABLE annotations REPLICA IDENTITY FULL;

CREATE TABLE IF NOT EXISTS qc_overrides (
    episode_id  text NOT NULL,
    "check"     text NOT NULL,
    verdict     text NOT NULL CHECK (verdict IN ('pass', 'fail')),
    reason      text,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (episode_id, "check")
);
ALTER TABLE qc_overrides REPLICA IDENTITY FULL;
