-- The sample analytics table used by scripts/demo and the integration tests, generated server-side
-- in one INSERT ... SELECT so that a million rows load in seconds.
-- psql variables: rows (row count), reader and reader_password (the read-only role pgwarden logs in as).
-- The data is deterministic (a function of id), so tests can compute expected answers:
--   status   DELAYED when id > 1000 and id % 20 = 7 (5% of the rows, none in the first thousand),
--            RETURNED when id % 10 = 3, DELIVERED otherwise;
--   carrier  one of 5, region one of 6, ship_date over 2023-01-01 .. 2024-12-30, weight 0.50 .. 50.49.

CREATE TABLE fct_shipments (
  id        bigint PRIMARY KEY,
  carrier   text    NOT NULL,
  status    text    NOT NULL,
  ship_date date    NOT NULL,
  region    text    NOT NULL,
  weight    numeric NOT NULL
);

INSERT INTO fct_shipments (id, carrier, status, ship_date, region, weight)
SELECT g,
       (ARRAY['UPS', 'FedEx', 'DHL', 'USPS', 'OnTrac'])[1 + g % 5],
       CASE WHEN g > 1000 AND g % 20 = 7 THEN 'DELAYED'
            WHEN g % 10 = 3 THEN 'RETURNED'
            ELSE 'DELIVERED' END,
       DATE '2023-01-01' + (g % 730)::int,
       (ARRAY['north', 'south', 'east', 'west', 'central', 'islands'])[1 + g % 6],
       round(0.5 + (g % 5000) / 100.0, 2)
FROM generate_series(1, :rows) AS g;

CREATE INDEX fct_shipments_ship_date_idx ON fct_shipments (ship_date);
ANALYZE fct_shipments;

CREATE ROLE :"reader" LOGIN PASSWORD :'reader_password';
GRANT SELECT ON fct_shipments TO :"reader";
