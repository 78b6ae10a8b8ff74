import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { program } from "../examples/quickstart.js"

describe("README quick start", () => {
  it.effect("charges once and replays the receipt to the retry", () =>
    Effect.gen(function*() {
      const { first, retry } = yield* program
      assert.isFalse(first.replayed)
      assert.isTrue(retry.replayed)
      assert.deepStrictEqual(retry.value, first.value)
    }))
})
