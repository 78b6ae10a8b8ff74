/**
 * The shared conformance suite on the run's Redis server (`TEST_REDIS_URL`, or a `redis-server`
 * started by the global setup). The suite drives expiry with `TestClock`, so the store reads
 * Effect's `Clock` here; the server's clock is tested in ServerClock.test.ts.
 */
import { StoreConformance } from "@effect-idempotency/testing"
import { storeLayer, uniquePrefix } from "./utils/fixtures.js"

StoreConformance.suite(
  "RedisStore conformance",
  storeLayer({ clock: "effect", prefix: uniquePrefix("conformance") }),
  { concurrency: 200 }
)
