/**
 * Known-good configurations of the other guarantees, the adapter-style deadline, the guarantee
 * report of an accepted at-least-once configuration, and the property inside `it.effect.prop`.
 */
import { PlatformModel, RetryProperty } from "@effect-idempotency/testing"
import type { SimulatedDownstream } from "@effect-idempotency/testing"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { holds, property, runs } from "./utils/orders.js"

describe.concurrent("RetryProperty passes known-good configurations: at most once, and the reported guarantee", () => {
  /** markUnknown, every failure stored: rejections and transient failures both drawn. */
  const atMostOnce = (
    kinds?: ReadonlyArray<SimulatedDownstream.Behaviour["_tag"]>
  ) => (property({ timeout: "2 seconds", onTimeout: "markUnknown", onTransient: "store" }, {
    downstream: { failures: ["Rejected", "Unavailable"], kinds }
  }))

  holds(
    "markUnknown with every failure stored writes at most once, even to an API that does not deduplicate",
    atMostOnce(),
    500,
    (report) => {
      assert.strictEqual(report.guarantee, "atMostOnce")
      assert.isAbove(report.casesWithOutcomeLost, 0, "some keys stayed blocked for reconciliation")
    }
  )

  // every exit after the write, each drawn on its own so that it comes up in most cases
  const exits: ReadonlyArray<readonly [string, ReadonlyArray<SimulatedDownstream.Behaviour["_tag"]>]> = [
    ["defects before and after the write", ["Succeed", "Die", "ApplyThenDie"]],
    ["rejections and transient failures before and after the write", ["Succeed", "Fail", "ApplyThenFail"]],
    ["writes that land after their caller gave up", ["Succeed", "WriteLandsLate"]]
  ]
  for (const [name, kinds] of exits) {
    holds(`markUnknown stays at most once through ${name}`, atMostOnce(kinds), 150, (report) => {
      assert.notStrictEqual(report.guarantee, "atLeastOnce")
    })
  }

  holds(
    "keepLease with the platform's remaining time as the deadline, under Netlify synchronous resends",
    property({ timeout: "30 seconds", onTimeout: "keepLease", lease: "12 seconds" }, {
      platform: PlatformModel.netlifySynchronous,
      deduplicate: true,
      deadlineMargin: "1 second",
      require: "exactlyOnce"
    }),
    300,
    (report) => {
      assert.strictEqual(report.guarantee, "exactlyOnceWithDeduplication")
    }
  )

  holds(
    "an accepted at-least-once configuration passes, and is reported as at least once",
    property({ timeout: "2 seconds", onTimeout: "release" }, {
      require: "atLeastOnce"
    }),
    200,
    (report) => {
      assert.strictEqual(report.guarantee, "atLeastOnce")
      assert.isAbove(report.casesWithDuplicates, 0)
      assert.include(report.text, "gives at least once")
    }
  )

  holds(
    "a downstream that always answers in time and a store without faults: exactly once, no deduplication needed",
    property({ timeout: "2 seconds", onTimeout: "keepLease" }, {
      downstream: { kinds: ["Succeed", "Fail"], maxLatency: "1 second" },
      faults: false,
      require: "exactlyOnce"
    }),
    200,
    (report) => {
      assert.strictEqual(report.guarantee, "exactlyOnce")
    }
  )

  describe("one case per fast-check run, inside it.effect.prop", () => {
    // `check` fails with the case's timeline; `play` reports the case for assertions of one's own
    const keepLease = property({ timeout: "2 seconds", onTimeout: "keepLease" }, { deduplicate: true })

    it.effect.prop(
      "keepLease with a deduplicating API never writes twice",
      [RetryProperty.arbitrary(keepLease)],
      ([scenario]) => RetryProperty.check(keepLease)(scenario),
      { timeout: 600_000, fastCheck: { numRuns: runs(100) } }
    )

    it.effect.prop(
      "and each case gives exactly once, with or without the API's deduplication",
      [RetryProperty.arbitrary(keepLease)],
      ([scenario]) =>
        Effect.map(RetryProperty.play(keepLease)(scenario), (report) => {
          assert.deepStrictEqual(report.violations, [], report.text)
          assert.include(["exactlyOnce", "exactlyOnceWithDeduplication"], report.guarantee)
        }),
      { timeout: 600_000, fastCheck: { numRuns: runs(100) } }
    )
  })
})
