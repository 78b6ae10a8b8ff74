/**
 * The shared conformance suite and the exit-path suite on the run's Redis server (`TEST_REDIS_URL`,
 * or a `redis-server` started by the global setup). The suites drive expiry with `TestClock`, so the
 * store reads Effect's `Clock` here; the server's clock is tested in ServerClock.test.ts.
 */
import { ExitPaths, StoreConformance } from "@effect-idempotency/testing"
import { storeLayer, uniquePrefix } from "./utils/fixtures.js"

StoreConformance.suite(
  "RedisStore conformance",
  storeLayer({ clock: "effect", prefix: uniquePrefix("conformance") }),
  { concurrency: 200 }
)

ExitPaths.suite("RedisStore exit paths", storeLayer({ clock: "effect", prefix: uniquePrefix("exit-paths") }))
