/**
 * Known-good configurations that give exactly once with a deduplicating downstream: thousands of
 * random cases (with the other known-good file) of retries, duplicates, resends, crashes at every
 * named point, store failures and stalls must pass.
 */
import { IdempotencyPolicy } from "@effect-idempotency/core"
import { PlatformModel, RetryProperty } from "@effect-idempotency/testing"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { createOrder, order, OrdersApiSimulated, runs } from "./utils/orders.js"

const TIMEOUT = { timeout: 600_000 }

const passes = <R>(property: RetryProperty.Property<R>, numRuns: number) =>
  Effect.gen(function*() {
    const report = yield* RetryProperty.run(property, { numRuns })
    assert.isTrue(report.passed, report.text)
    assert.strictEqual(report.numRuns, numRuns)
    return report
  })

describe("RetryProperty passes known-good configurations: exactly once with a deduplicating downstream", () => {
  it.effect(
    "keepLease, key forwarded to a deduplicating API, under AWS Lambda's asynchronous retries",
    () =>
      Effect.gen(function*() {
        const report = yield* passes(
          RetryProperty.make({
            operation: createOrder({ timeout: "2 seconds", onTimeout: "keepLease" }),
            payload: order,
            platform: PlatformModel.awsLambdaAsync,
            deduplicate: true,
            services: OrdersApiSimulated,
            require: "exactlyOnce"
          }),
          runs(500)
        )
        assert.strictEqual(report.guarantee, "exactlyOnceWithDeduplication")
        assert.isAbove(report.summary.casesDeduplicated, 0, "some cases needed the downstream's deduplication")
        assert.strictEqual(report.summary.casesWithDuplicates, 0)
      }),
    TIMEOUT
  )

  it.effect(
    "keepLease with a heartbeat and waiting on conflicts, under Netlify background retries",
    () =>
      Effect.gen(function*() {
        const report = yield* passes(
          RetryProperty.make({
            operation: createOrder({
              timeout: "5 minutes",
              onTimeout: "keepLease",
              lease: "1 minute",
              heartbeat: "20 seconds",
              inProgress: IdempotencyPolicy.waitOnConflict(
                Schedule.spaced("10 seconds").pipe(Schedule.intersect(Schedule.recurs(3)))
              )
            }),
            payload: order,
            platform: PlatformModel.netlifyBackground,
            deduplicate: true,
            services: OrdersApiSimulated,
            require: "exactlyOnce"
          }),
          runs(300)
        )
        assert.strictEqual(report.guarantee, "exactlyOnceWithDeduplication")
      }),
    TIMEOUT
  )

  it.effect("timeout policy release is safe too when the downstream deduplicates", () =>
    Effect.gen(function*() {
      const report = yield* passes(
        RetryProperty.make({
          operation: createOrder({ timeout: "2 seconds", onTimeout: "release" }),
          payload: order,
          platform: PlatformModel.awsLambdaAsync,
          deduplicate: true,
          services: OrdersApiSimulated,
          require: "exactlyOnce"
        }),
        runs(300)
      )
      assert.strictEqual(report.guarantee, "exactlyOnceWithDeduplication")
    }), TIMEOUT)
})
