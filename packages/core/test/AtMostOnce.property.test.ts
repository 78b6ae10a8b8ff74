/**
 * With the `markUnknown` timeout policy and every domain failure stored, the downstream runs at most
 * once, ever (within the record's TTL): through crashes, timeouts, hangs and concurrent retries.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import type { Attempt, Behaviour, Config } from "./utils/protocolModel.js"
import { config, NUM_RUNS, play } from "./utils/protocolModel.js"

const after = FastCheck.integer({ min: 0, max: 20_000 })

const behaviour: FastCheck.Arbitrary<Behaviour> = FastCheck.oneof(
  FastCheck.record({ _tag: FastCheck.constant("Succeed" as const), after }),
  FastCheck.record({ _tag: FastCheck.constant("Reject" as const), after }),
  FastCheck.record({ _tag: FastCheck.constant("Hang" as const) })
)

const atMostOnceConfig: FastCheck.Arbitrary<Config> = config.map((cfg) => ({
  ...cfg,
  onTimeout: "markUnknown" as const,
  onRejected: "store" as const,
  ttlMs: 3_600_000
}))

const attempts: FastCheck.Arbitrary<ReadonlyArray<Attempt>> = FastCheck.array(
  FastCheck.record({
    gap: FastCheck.integer({ min: 0, max: 120_000 }),
    behaviour,
    crashAfter: FastCheck.option(FastCheck.integer({ min: 0, max: 30_000 }), { nil: undefined, freq: 3 })
  }),
  { minLength: 1, maxLength: 5 }
)

describe("at-most-once (markUnknown)", () => {
  it.effect.prop(
    "the downstream runs at most once, ever, within the TTL",
    [atMostOnceConfig, attempts],
    ([cfg, scenario]) =>
      Effect.gen(function*() {
        const { executions, violations } = yield* play(cfg, scenario)
        assert.deepStrictEqual(violations, [])
        assert.isAtMost(executions.length, 1)
      }),
    { timeout: 600_000, fastCheck: { numRuns: NUM_RUNS } }
  )
})
