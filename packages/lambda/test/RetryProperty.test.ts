/**
 * The retry property run on the operation a deployed handler runs (`handler.operation`): the same
 * name, schemas and policies, not a copy of them. A configuration that holds passes; a known-bad one
 * (a defect released where the downstream does not deduplicate) is caught with a duplicate write.
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import type { IdempotencyPolicy } from "@effect-idempotency/core"
import { LambdaEvent, LambdaSqs } from "@effect-idempotency/lambda"
import { Charges } from "@effect-idempotency/test-support"
import { PlatformModel, RetryProperty } from "@effect-idempotency/testing"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"

const settings = (onDefect: IdempotencyPolicy.TimeoutPolicy) => ({
  layer: Layer.merge(IdempotencyStore.layerMemoryWith({ warn: false }), Charges.PaymentsUnused),
  success: Charges.Charged,
  failure: Charges.ChargeFailed,
  // a failure may come after the write: it is stored, not released
  onFailure: () => "store" as const,
  ...Charges.policies(onDefect)
})

const eventHandler = (onDefect: IdempotencyPolicy.TimeoutPolicy) =>
  LambdaEvent.idempotent({
    name: "charge-event",
    ...settings(onDefect),
    event: Charges.Charge,
    key: (event) => event.chargeId,
    handler: (event) => Effect.flatMap(Charges.Payments, (payments) => payments.charge(event))
  })

const sqsHandler = (onDefect: IdempotencyPolicy.TimeoutPolicy) =>
  LambdaSqs.batch({
    name: "charge-sqs",
    ...settings(onDefect),
    body: Schema.parseJson(Charges.Charge),
    key: (body) => body.chargeId,
    handler: (body) => Effect.flatMap(Charges.Payments, (payments) => payments.charge(body))
  })

/** The property of a handler's operation: one charge, Lambda's asynchronous retries, no deduplication. */
const propertyOf = (
  handler: { readonly operation: LambdaEvent.Operation<typeof Charges.Charge.Type, unknown, unknown, Charges.Payments> }
) => ({
  operation: handler.operation,
  payload: Charges.charge,
  platform: PlatformModel.awsLambdaAsync,
  deduplicate: false,
  services: Charges.PaymentsSimulated
})

describe.each([
  { name: "LambdaEvent.idempotent", make: eventHandler },
  { name: "LambdaSqs.batch", make: sqsHandler }
])("RetryProperty on $name's operation", ({ make }) => {
  it.effect("the deployed configuration holds at most once under Lambda's retries", () =>
    Effect.gen(function*() {
      const handler = make("markUnknown")
      const report = yield* RetryProperty.assert(propertyOf(handler), Charges.good)
      assert.isTrue(report.passed)
      yield* Effect.promise(() => handler.dispose())
    }), Charges.TIMEOUT)

  it.effect(
    "a defect released where the downstream does not deduplicate is caught: the write is repeated",
    () =>
      Effect.gen(function*() {
        const handler = make("release")
        Charges.repeats(yield* RetryProperty.run({ ...propertyOf(handler), ...Charges.defectsOnly }, Charges.bad))
        yield* Effect.promise(() => handler.dispose())
      }),
    Charges.TIMEOUT
  )
})
