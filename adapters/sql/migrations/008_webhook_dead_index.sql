-- Dead webhook deliveries (every attempt of the schedule failed), for the operations gauge
-- ludus_webhook_deliveries{status="dead"} (docs/operations.md "Metrics"): counting them reads this
-- small partial index instead of every finished delivery kept for the retention period.
CREATE INDEX webhook_deliveries_dead ON webhook_deliveries (webhook_id) WHERE status = 'dead';
