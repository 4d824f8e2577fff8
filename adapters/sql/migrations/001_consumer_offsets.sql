-- Offsets of every consumer group, stored in the same transaction as the state they produced
-- (ARCHITECTURE.md invariant 2). Kafka's own committed offsets are for lag monitoring only.
CREATE TABLE consumer_offsets (
  group_id    text    NOT NULL,
  topic       text    NOT NULL,
  partition   integer NOT NULL,
  next_offset bigint  NOT NULL,
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (group_id, topic, partition)
);
