/**
 * Property tests of the protocol on the memory store under TestClock (see `utils/protocolModel.ts`).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { attempts, config, NUM_RUNS, play } from "./utils/protocolModel.js"

describe("protocol properties (memory store, TestClock)", () => {
  it.effect.prop(
    "no double execution, no execution without the reservation, replays return the recorded outcome",
    [config, attempts],
    ([cfg, scenario]) =>
      Effect.gen(function*() {
        const { violations } = yield* play(cfg, scenario)
        assert.deepStrictEqual(violations, [])
      }),
    { timeout: 600_000, fastCheck: { numRuns: NUM_RUNS } }
  )
})
