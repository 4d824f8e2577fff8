-- The embedded shape's event log (adapters/eventlog/local.ts): a partitioned, durable log in SQL.
-- Offsets are assigned per partition, contiguously, under the partition row's lock
-- (UPDATE event_log_partitions ... RETURNING next_offset), in the append's own transaction.
CREATE TABLE event_log_topics (
  topic      text        PRIMARY KEY,
  partitions integer     NOT NULL CHECK (partitions > 0),
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE event_log_partitions (
  topic       text    NOT NULL REFERENCES event_log_topics (topic),
  partition   integer NOT NULL,
  -- The offset the next appended record gets (the end offset, for lag).
  next_offset bigint  NOT NULL DEFAULT 0,
  PRIMARY KEY (topic, partition)
);

-- One row per record. value is the Avro binary (avsc, no registry framing) written with the
-- topic's schema number schema_version (1-based position in the Topic's schema list).
-- RETENTION: adapters/eventlog/local.ts `enforceRetention` deletes, per (topic, partition), the
-- oldest rows appended before the retention period, in chunks along the primary key below, never
-- a partition's last row. Consumers that resume below the oldest kept offset start at the oldest
-- kept record (like Kafka's offset reset).
CREATE TABLE event_log_records (
  topic          text        NOT NULL,
  partition      integer     NOT NULL,
  "offset"       bigint      NOT NULL,
  key            text        NOT NULL,
  schema_version integer     NOT NULL,
  value          bytea       NOT NULL,
  appended_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (topic, partition, "offset"),
  FOREIGN KEY (topic, partition) REFERENCES event_log_partitions (topic, partition)
);
