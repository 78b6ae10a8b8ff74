/**
 * With the `markUnknown` timeout policy (and so for defects too) and every domain failure stored,
 * the downstream runs at most once, ever (within the record's TTL): through crashes, timeouts,
 * hangs, defects before and after the write, values that do not encode, downstreams that ignore
 * interruption, deadlines, store outages and concurrent retries.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { NUM_RUNS, play, scenario } from "./utils/protocolModel.js"

const atMostOnce = scenario.map(([cfg, attempts]) =>
  [
    {
      ...cfg,
      onTimeout: "markUnknown" as const,
      onDefect: "markUnknown" as const,
      onRejected: "store" as const,
      onTransient: "store" as const,
      ttlMs: 3_600_000
    },
    attempts
  ] as const
)

describe("at-most-once (markUnknown)", () => {
  it.effect.prop(
    "the downstream runs at most once, ever, within the TTL",
    [atMostOnce],
    ([[cfg, attempts]]) =>
      Effect.gen(function*() {
        const { executions, violations } = yield* play(cfg, attempts)
        assert.deepStrictEqual(violations, [])
        // every record lives at least its TTL from its reservation: until then nothing runs again
        // (the attempts start within the TTL, but a run can take simulated time of its own, so the
        // last one may start when the first record has just expired, and may then run)
        const first = executions[0]
        const within = first === undefined ? [] : executions.filter((e) => e.start < first.start + cfg.ttlMs)
        assert.isAtMost(within.length, 1)
      }),
    { timeout: 600_000, fastCheck: { numRuns: NUM_RUNS } }
  )
})
