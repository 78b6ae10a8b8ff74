/**
 * The retry property run on the operation a deployed route runs: an `HttpRouter` route's
 * (`route.operation`, from `IdempotencyMiddleware`) and an `HttpApi` endpoint's
 * (`IdempotencyHttpApi.operation`, through the api's app and `IdempotencyHttpApi.layer`). A
 * configuration that holds passes; a known-bad one (a defect released where the downstream does not
 * deduplicate) is caught with a duplicate write; the route's own options are the ones the property
 * sees.
 */
import { IdempotencyError, IdempotencyStore } from "@effect-idempotency/core"
import type { IdempotencyPolicy } from "@effect-idempotency/core"
import type { HttpIdempotency } from "@effect-idempotency/http"
import { StoredResponse } from "@effect-idempotency/http"
import { IdempotencyHttpApi, IdempotencyMiddleware } from "@effect-idempotency/platform"
import { Charges } from "@effect-idempotency/test-support"
import { PlatformModel, RetryProperty } from "@effect-idempotency/testing"
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

// ---- an HttpRouter route: IdempotencyMiddleware around the route's handler ----

const chargeHandler = Effect.gen(function*() {
  const charge = yield* HttpServerRequest.schemaBodyJson(Charges.Charge)
  const payments = yield* Charges.Payments
  return yield* payments.charge(charge).pipe(
    Effect.flatMap((charged) => HttpServerResponse.json(charged, { status: 201 })),
    Effect.catchTag("ChargeFailed", () => HttpServerResponse.json({ error: "charge failed" }, { status: 409 }))
  )
})

const route = (onDefect: IdempotencyPolicy.TimeoutPolicy, options?: IdempotencyMiddleware.Options) =>
  chargeHandler.pipe(IdempotencyMiddleware.make({ name: "charge-route", ...Charges.policies(onDefect), ...options }))

// ---- an HttpApi endpoint: IdempotencyHttpApi.idempotent() and IdempotencyHttpApi.layer ----

class PaymentsGroup extends HttpApiGroup.make("payments")
  .add(
    HttpApiEndpoint.post("charge", "/charges").setPayload(Charges.Charge).addSuccess(Charges.Charged, { status: 201 })
      .addError(Charges.ChargeFailed, { status: 409 }).pipe(IdempotencyHttpApi.idempotent())
  )
  .add(
    HttpApiEndpoint.post("refund", "/refunds").setPayload(Charges.Charge).addSuccess(Charges.Charged, { status: 201 })
      .addError(Charges.ChargeFailed, { status: 409 }).pipe(
        IdempotencyHttpApi.idempotent({ name: "refunds", onDefect: "release" })
      )
  )
{}
class Api extends HttpApi.make("shop").add(PaymentsGroup) {}

const PaymentsLive = HttpApiBuilder.group(Api, "payments", (handlers) =>
  handlers
    .handle("charge", ({ payload }) => Effect.flatMap(Charges.Payments, (payments) => payments.charge(payload)))
    .handle("refund", ({ payload }) => Effect.flatMap(Charges.Payments, (payments) => payments.charge(payload))))

/** The api as it is deployed, its idempotency layer's options given, over the simulated payments API. */
const apiServices = (options: IdempotencyHttpApi.LayerOptions<never, never>) =>
  Layer.mergeAll(
    HttpApiBuilder.api(Api).pipe(
      Layer.provide(PaymentsLive),
      Layer.provide(IdempotencyHttpApi.layer(Api, options)),
      // the layer is built with a store; each request of the operation runs with the property's
      Layer.provide(IdempotencyStore.layerMemoryWith({ warn: false }))
    ),
    HttpApiBuilder.Router.Live,
    HttpApiBuilder.Middleware.layer,
    HttpServer.layerContext
  ).pipe(Layer.provide(Charges.PaymentsSimulated))

const { charge, TIMEOUT } = Charges

/** A good configuration passes under a client's resends. */
const holds = (property: { readonly name: string }) => (report: RetryProperty.Report) =>
  assert.isTrue(report.passed, `${property.name}: ${report.text}`)

/** A defect released where the downstream does not deduplicate is caught: the write is repeated. */
const repeats = (report: RetryProperty.Report) => Charges.repeats(report, "charge")

const { bad, good } = Charges
const property = {
  payload: { body: charge },
  platform: PlatformModel.netlifySynchronous,
  deduplicate: false
} as const
const { defectsOnly } = Charges

describe("RetryProperty on an HttpRouter route's operation (IdempotencyMiddleware)", () => {
  it.effect("the deployed configuration holds at most once under a client's resends", () =>
    Effect.map(
      RetryProperty.run(
        { ...property, operation: route("markUnknown").operation, services: Charges.PaymentsSimulated },
        good
      ),
      holds({ name: "route" })
    ), TIMEOUT)

  it.effect(
    "a defect released where the downstream does not deduplicate is caught: the write is repeated",
    () =>
      Effect.map(
        RetryProperty.run({
          ...property,
          ...defectsOnly,
          operation: route("release").operation,
          services: Charges.PaymentsSimulated
        }, bad),
        repeats
      ),
    TIMEOUT
  )
})

describe("RetryProperty on an HttpApi endpoint's operation (IdempotencyHttpApi)", () => {
  const operation = IdempotencyHttpApi.operation(Api, "payments", "charge")

  it.effect("the deployed configuration holds at most once under a client's resends", () =>
    Effect.map(
      RetryProperty.run({ ...property, operation, services: apiServices(Charges.policies("markUnknown")) }, good),
      holds({ name: "endpoint" })
    ), TIMEOUT)

  it.effect("a defect released by the layer's options is caught: the write is repeated", () =>
    Effect.map(
      RetryProperty.run(
        { ...property, ...defectsOnly, operation, services: apiServices(Charges.policies("release")) },
        bad
      ),
      repeats
    ), TIMEOUT)
})

describe("the operation runs with the deployed options", () => {
  it.effect("an endpoint's own options (its name, its onDefect) are the operation's", () =>
    Effect.gen(function*() {
      // the layer says markUnknown; the refund endpoint's own option says release, and wins
      const operation = IdempotencyHttpApi.operation(Api, "payments", "refund")
      assert.strictEqual(operation.name, "refunds")
      repeats(
        yield* RetryProperty.run({
          ...property,
          ...defectsOnly,
          operation,
          services: apiServices(Charges.policies("markUnknown"))
        }, bad)
      )
    }), TIMEOUT)

  it.effect("the route's fingerprint options are the operation's", () =>
    Effect.gen(function*() {
      const run = (operation: HttpIdempotency.Operation<unknown, Charges.Payments>) =>
        Effect.gen(function*() {
          const first = yield* operation.runDetailed({ key: "k-1", payload: { path: "/charges?a=1", body: charge } })
          const second = yield* Effect.either(
            operation.runDetailed({ key: "k-1", payload: { path: "/charges?a=2", body: charge } })
          )
          return { first, second }
        }).pipe(
          Effect.provide(IdempotencyStore.layerMemoryWith({ warn: false })),
          Effect.provide(Layer.succeed(Charges.Payments, { charge: () => Effect.succeed({ receipt: 7 }) }))
        )
      const included = yield* run(route("markUnknown").operation)
      assert.strictEqual(included.first.value.status, 201)
      assert.deepStrictEqual(JSON.parse(StoredResponse.text(included.first.value)), { receipt: 7 })
      assert.isTrue(included.second._tag === "Left" && included.second.left instanceof IdempotencyError.KeyReused)
      const ignored = yield* run(route("markUnknown", { query: "ignore" }).operation)
      assert.isTrue(ignored.second._tag === "Right" && ignored.second.right.replayed)
      assert.deepStrictEqual(ignored.second._tag === "Right" && ignored.second.right.value, ignored.first.value)
    }))
})
