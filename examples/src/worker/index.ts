/**
 * The Worker of the example: `POST /orders` creates an order through the order API (the service
 * binding `ORDERS`, `OrdersApi.ts` here), made idempotent by `IdempotentFetch` of
 * `@effect-idempotency/http` on `SqlIdempotencyStore` over the D1 binding `DB`. A client that gave
 * up on a request (its timeout, a dropped connection) and sends it again with the same
 * `Idempotency-Key` gets the first attempt's response, byte for byte, and the order API is called
 * once: 409 while the first attempt runs, 422 for the key with another body, 400 without a valid key.
 *
 * The bindings are typed by the little the Worker uses of them: no `@cloudflare/workers-types`.
 */
import { IdempotentFetch, StoredResponse } from "@effect-idempotency/http"
import { D1SqlClient, SqlIdempotencyStore } from "@effect-idempotency/sql"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { Created, Order } from "./OrdersApi.js"

/** A service binding: another Worker, called without leaving Cloudflare. */
export interface Fetcher {
  fetch(request: Request): Promise<Response>
}

/** The third argument of `fetch`. */
export interface ExecutionContext {
  waitUntil(promise: Promise<unknown>): void
}

/** The bindings of the Worker (`wrangler.toml`). */
export interface Env {
  /** The D1 database of the idempotency records. */
  readonly DB: D1SqlClient.D1Database
  /** The order API. */
  readonly ORDERS: Fetcher
  /** The time an attempt may take, in milliseconds (a `[vars]` entry). Default `TIME_LIMIT`. */
  readonly TIME_LIMIT_MS?: string | undefined
}

/**
 * The time an attempt is sure to have: once its client has gone, a Worker's request lives on only
 * through `waitUntil`, for 30 seconds. The order API gets the time limit less the margin (a quarter
 * of it, at most 1 s), so the outcome, or the timeout policy, is recorded before the Worker stops.
 */
export const TIME_LIMIT: Duration.Duration = Duration.seconds(30)

/** The order API answered with something other than a new order; this one refuses before it writes. */
export class OrdersApiError extends Schema.TaggedError<OrdersApiError>()("OrdersApiError", {
  status: Schema.Number
}) {
  override get message() {
    return `the order API answered ${this.status}`
  }
}

const timeLimitOf = (env: Env): Duration.Duration =>
  Schema.decodeUnknownOption(Schema.NumberFromString)(env.TIME_LIMIT_MS).pipe(
    Option.map(Duration.millis),
    Option.getOrElse(() => TIME_LIMIT)
  )

const decodeCreated = Schema.decodeUnknown(Schema.parseJson(Created))
const decoder = new TextDecoder()

/**
 * One call to the order API, answered with its body's bytes as they came. A call that rejects, or an
 * answer that cannot be read, may come after the order was written: both are defects, whose outcome
 * is unknown (the defect policy, here the timeout policy). The signal aborts the call when the
 * attempt's time is up.
 */
const createOrder = (orders: Fetcher, order: Order) =>
  Effect.gen(function*() {
    const response = yield* Effect.promise((signal) =>
      orders.fetch(
        new Request("https://orders-api/orders", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(order),
          signal
        })
      )
    )
    const bytes = new Uint8Array(yield* Effect.promise(() => response.arrayBuffer()))
    if (response.status !== 201) return yield* new OrdersApiError({ status: response.status })
    const created = yield* Effect.orDie(decodeCreated(decoder.decode(bytes)))
    return new Response(bytes, {
      status: 201,
      headers: { "content-type": "application/json", location: `/orders/${created.orderId}` }
    })
  })

const problem = (status: number, detail: string): Response =>
  StoredResponse.toWeb(StoredResponse.problem(status, detail))

/**
 * The idempotent handler of one request, with its own store and runtime (see `fetch`). The key is
 * the `Idempotency-Key` header.
 */
const handlerOf = (env: Env) =>
  IdempotentFetch.make({
    name: "create-order",
    layer: SqlIdempotencyStore.layerWith({ migrate: true }).pipe(Layer.provide(D1SqlClient.layer(env.DB))),
    // a body that is not an order is the wrapper's 400, before the key is read: nothing is touched
    prepare: (incoming) => incoming.json(Order),
    timeLimit: timeLimitOf(env),
    // the order API does not deduplicate: an attempt cut off by its time limit blocks its key
    // (a 504 replayed) rather than let a retry write a second order
    onTimeout: "markUnknown",
    handler: (order) => createOrder(env.ORDERS, order),
    // the wrapper answers the body's failures itself: what is left is the order API's refusal
    onError: (error) => problem(502, error.message)
  })

export default {
  fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
    if (new URL(request.url).pathname !== "/orders") return Promise.resolve(problem(404, "No such resource"))
    if (request.method !== "POST") {
      return Promise.resolve(new Response(null, { status: 405, headers: { allow: "POST" } }))
    }
    // A store, and its runtime, per request: the binding arrives with the request, and each
    // request's calls are bounded by timers of its own. workerd cancels a request's timers once its
    // response is sent: a store kept across requests replaces the call-timeout watcher that such a
    // timer took down at its next call (`StoreDeadlines`), but a call in flight meanwhile is timed
    // out only once another call comes.
    const handler = handlerOf(env)
    const response = handler(request).finally(handler.dispose)
    // workerd cancels a request whose client has gone, unless `waitUntil` holds it (for 30 s at
    // most). Cut off between the order API's write and the record, the attempt would leave its key
    // IN_PROGRESS: the client's retries would get 409 until the lease ends, then the 504 of an
    // unknown outcome, never the order. Held, it records the order API's answer, which they get.
    ctx.waitUntil(response)
    return response
  }
}
