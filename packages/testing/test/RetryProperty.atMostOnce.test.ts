/**
 * Known-good configurations of the other guarantees, the adapter-style deadline, the guarantee
 * report of an accepted at-least-once configuration, and the per-case style with `it.effect.prop`.
 */
import { PlatformModel, RetryProperty } from "@effect-idempotency/testing"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { createOrder, order, OrdersApiSimulated, runs } from "./utils/orders.js"

const TIMEOUT = { timeout: 600_000 }

const passes = <R>(property: RetryProperty.Property<R>, numRuns: number) =>
  Effect.gen(function*() {
    const report = yield* RetryProperty.run(property, { numRuns })
    assert.isTrue(report.passed, report.text)
    assert.strictEqual(report.numRuns, numRuns)
    return report
  })

describe("RetryProperty passes known-good configurations: at most once, and the reported guarantee", () => {
  it.effect(
    "markUnknown with every failure stored writes at most once, even to an API that does not deduplicate",
    () =>
      Effect.gen(function*() {
        const report = yield* passes(
          RetryProperty.make({
            operation: createOrder({ timeout: "2 seconds", onTimeout: "markUnknown", onTransient: "store" }),
            payload: order,
            platform: PlatformModel.awsLambdaAsync,
            deduplicate: false,
            services: OrdersApiSimulated
          }),
          runs(500)
        )
        assert.strictEqual(report.guarantee, "atMostOnce")
        assert.isAbove(report.summary.casesWithOutcomeLost, 0, "some keys stayed blocked for reconciliation")
      }),
    TIMEOUT
  )

  it.effect(
    "keepLease with the platform's remaining time as the deadline, under Netlify synchronous resends",
    () =>
      Effect.gen(function*() {
        const report = yield* passes(
          RetryProperty.make({
            operation: createOrder({ timeout: "30 seconds", onTimeout: "keepLease", lease: "12 seconds" }),
            payload: order,
            platform: PlatformModel.netlifySynchronous,
            deduplicate: true,
            services: OrdersApiSimulated,
            deadlineMargin: "1 second",
            require: "exactlyOnce"
          }),
          runs(300)
        )
        assert.strictEqual(report.guarantee, "exactlyOnceWithDeduplication")
      }),
    TIMEOUT
  )

  it.effect(
    "an accepted at-least-once configuration passes, and is reported as at least once",
    () =>
      Effect.gen(function*() {
        const report = yield* passes(
          RetryProperty.make({
            operation: createOrder({ timeout: "2 seconds", onTimeout: "release" }),
            payload: order,
            platform: PlatformModel.awsLambdaAsync,
            deduplicate: false,
            services: OrdersApiSimulated,
            require: "atLeastOnce"
          }),
          runs(200)
        )
        assert.strictEqual(report.guarantee, "atLeastOnce")
        assert.isAbove(report.summary.casesWithDuplicates, 0)
        assert.include(report.text, "gives at least once")
      }),
    TIMEOUT
  )

  it.effect(
    "a downstream that always answers in time and a store without faults: exactly once, no deduplication needed",
    () =>
      Effect.gen(function*() {
        const report = yield* passes(
          RetryProperty.make({
            operation: createOrder({ timeout: "2 seconds", onTimeout: "keepLease" }),
            payload: order,
            platform: PlatformModel.awsLambdaAsync,
            deduplicate: false,
            services: OrdersApiSimulated,
            downstream: { kinds: ["Succeed", "Fail"], maxLatency: "1 second" },
            faults: false,
            require: "exactlyOnce"
          }),
          runs(200)
        )
        assert.strictEqual(report.guarantee, "exactlyOnce")
      }),
    TIMEOUT
  )

  describe("one case per fast-check run, with it.effect.prop", () => {
    const property = RetryProperty.make({
      operation: createOrder({ timeout: "2 seconds", onTimeout: "keepLease" }),
      payload: order,
      platform: PlatformModel.awsLambdaAsync,
      deduplicate: true,
      services: OrdersApiSimulated
    })

    it.effect.prop(
      "keepLease with a deduplicating API never writes twice",
      [property.arbitrary],
      ([scenario]) => property.check(scenario),
      { timeout: 600_000, fastCheck: { numRuns: runs(200) } }
    )

    it.effect("the property's summary tells the guarantee of the cases it played", () =>
      Effect.gen(function*() {
        const summary = yield* property.summary
        assert.strictEqual(summary.cases, runs(200))
        assert.strictEqual(summary.casesWithViolations, 0)
        assert.strictEqual(summary.guarantee, "exactlyOnceWithDeduplication")
      }))
  })
})
