/**
 * The function under test: `create-order`, a Netlify function that writes an order through the
 * downstream API. Built twice with the Netlify adapter: as a plain function, and as an idempotent
 * one. Both call the downstream through an `HttpClient` that forwards the step key of the current
 * attempt (inside an idempotent operation only).
 */
import type { IdempotencyPolicy, IdempotencyStore } from "@effect-idempotency/core"
import { FunctionResponse, Invocation, NetlifyFunction } from "@effect-idempotency/netlify"
import { IdempotencyHttpClient } from "@effect-idempotency/platform"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpBody from "@effect/platform/HttpBody"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { Created, Order } from "./Downstream.js"

/** The `HttpClient` of the function: fetch, with the step key forwarded inside an operation. */
export const HttpClientLive: Layer.Layer<HttpClient.HttpClient> = IdempotencyHttpClient.layer.pipe(
  Layer.provide(FetchHttpClient.layer)
)

/** The function's work: one POST to the downstream's `/orders`, step `create-order`. */
export const createOrder = (downstreamUrl: string, order: Order) =>
  Effect.gen(function*() {
    const client = (yield* HttpClient.HttpClient).pipe(HttpClient.filterStatusOk)
    const response = yield* client.post(`${downstreamUrl}/orders`, { body: HttpBody.unsafeJson(order) })
    const created = yield* HttpClientResponse.schemaBodyJson(Created)(response)
    return FunctionResponse.json(
      { ...created, downstreamReplayed: response.headers["idempotent-replayed"] === "true" },
      { status: 201, headers: { location: `/orders/${created.orderId}` } }
    )
  }).pipe(IdempotencyHttpClient.withStep("create-order"))

export interface Options {
  readonly downstreamUrl: string
  readonly timeLimit: Duration.DurationInput
  /** The function's log lines go here (the journal of the run). */
  readonly logger: Layer.Layer<never>
}

/**
 * Without idempotency: every invocation writes. The platform stops it at its time limit
 * (`interruptOnAbort`: the runner's abort plays the platform's kill).
 */
export const unprotected = (options: Options): NetlifyFunction.Handler =>
  NetlifyFunction.make({
    name: "create-order",
    layer: Layer.merge(HttpClientLive, options.logger),
    timeLimit: options.timeLimit,
    interruptOnAbort: true,
    handler: Invocation.text.pipe(
      Effect.flatMap(Schema.decodeUnknown(Schema.parseJson(Order))),
      Effect.flatMap((order) => createOrder(options.downstreamUrl, order))
    )
  })

export interface ProtectedOptions extends Options {
  readonly store: Layer.Layer<IdempotencyStore.IdempotencyStore>
  readonly margin: Duration.DurationInput
  readonly onTimeout: IdempotencyPolicy.TimeoutPolicy
}

/**
 * With idempotency: the key is the client's `Idempotency-Key` header; the downstream call gets the
 * time left less `margin`, so the outcome or the timeout policy is recorded before the platform's
 * cut-off; the lease is the time limit.
 */
export const idempotent = (options: ProtectedOptions): NetlifyFunction.Handler =>
  NetlifyFunction.idempotent({
    name: "create-order",
    layer: Layer.mergeAll(options.store, HttpClientLive, options.logger),
    payload: Order,
    timeLimit: options.timeLimit,
    margin: options.margin,
    onTimeout: options.onTimeout,
    interruptOnAbort: true,
    handler: (order) => createOrder(options.downstreamUrl, order)
  })
