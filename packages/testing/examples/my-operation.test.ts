/**
 * Property-check an idempotent operation under a platform's retries. Copy this file next to your
 * operation: point `operation` at it, simulate the API it calls over `SimulatedDownstream`, and
 * pick the platform it runs on.
 */
import { Idempotency, IdempotencyContext } from "@effect-idempotency/core"
import { PlatformModel, RetryProperty, SimulatedDownstream } from "@effect-idempotency/testing"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Schema } from "effect"

// Your application (normally imported): a payments API, and the charge that must not happen twice.

class PaymentDeclined extends Schema.TaggedError<PaymentDeclined>()("PaymentDeclined", {}) {}
class PaymentsUnavailable extends Schema.TaggedError<PaymentsUnavailable>()("PaymentsUnavailable", {}) {}

class PaymentsApi extends Context.Tag("app/PaymentsApi")<PaymentsApi, {
  readonly charge: (
    request: { readonly customerId: string; readonly amountCents: number },
    idempotencyKey: string
  ) => Effect.Effect<{ readonly chargeId: string }, PaymentDeclined | PaymentsUnavailable>
}>() {}

export const chargeCustomer = Idempotency.make({
  name: "charge-customer",
  payload: Schema.Struct({ customerId: Schema.String, amountCents: Schema.Int }),
  success: Schema.Struct({ chargeId: Schema.String }),
  failure: PaymentDeclined, // declines are recorded and replayed; outages release the key
  timeout: "2 seconds",
  execute: (charge) =>
    Effect.gen(function*() {
      const api = yield* PaymentsApi
      return yield* api.charge(charge, yield* IdempotencyContext.stepKey("payments"))
    })
})

// The payments API, simulated: it deduplicates by Idempotency-Key, like most payment APIs.

const PaymentsApiSimulated = Layer.effect(
  PaymentsApi,
  Effect.map(SimulatedDownstream.SimulatedDownstream, (downstream) => ({
    charge: (request, idempotencyKey) =>
      downstream.call({ endpoint: "POST /charges", idempotencyKey, body: request }).pipe(
        Effect.map((receipt) => ({ chargeId: `ch_${receipt.writeId}` })),
        Effect.mapError((error) => error.code === "Declined" ? new PaymentDeclined() : new PaymentsUnavailable())
      )
  }))
)

// The test.

describe("charge-customer", () => {
  it.effect("charges once under AWS Lambda's retries, duplicate deliveries and crashes", () =>
    Effect.gen(function*() {
      const property = RetryProperty.make({
        operation: chargeCustomer,
        payload: { customerId: "cus_42", amountCents: 1999 },
        platform: PlatformModel.awsLambdaAsync,
        deduplicate: true,
        services: PaymentsApiSimulated,
        downstream: { failures: ["Declined", "Unavailable"] }
      })
      const report = yield* RetryProperty.assert(property, { numRuns: 200 })
      assert.strictEqual(report.guarantee, "exactlyOnceWithDeduplication")
    }), { timeout: 120_000 })
})
