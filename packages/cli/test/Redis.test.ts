/**
 * The CLI on Redis: the server named by `TEST_REDIS_URL`, else a `redis-server` the run starts.
 */
import * as Layer from "effect/Layer"
import { redisUrl, storeLayer, uniquePrefix } from "../../redis/test/utils/fixtures.js"
import { CliStore, scenario } from "./utils/scenario.js"

const prefix = uniquePrefix("cli")

scenario("effect-idempotency on Redis", {
  layer: Layer.mergeAll(
    storeLayer({ prefix }),
    Layer.succeed(CliStore, { args: ["--store", redisUrl, "--prefix", prefix] })
  ),
  migrated: { applied: false }
})
