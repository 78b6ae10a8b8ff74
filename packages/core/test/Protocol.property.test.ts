/**
 * Property tests of the protocol on the memory store under TestClock (see `utils/protocolModel.ts`).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { NUM_RUNS, play, scenario } from "./utils/protocolModel.js"

describe("protocol properties (memory store, TestClock)", () => {
  it.effect.prop(
    "no overlap, no execution past its lease or without the reservation, no re-execution no policy chose, " +
      "replays return the recorded outcome",
    [scenario],
    ([[cfg, attempts]]) =>
      Effect.gen(function*() {
        const { violations } = yield* play(cfg, attempts)
        assert.deepStrictEqual(violations, [])
      }),
    { timeout: 600_000, fastCheck: { numRuns: NUM_RUNS } }
  )
})
