/**
 * Idempotent routes for `@effect/platform`'s `HttpApp` and `HttpRouter`: an `HttpMiddleware` that
 * runs the app at most once per `Idempotency-Key` (and scope), records its response (status,
 * allowed headers, body bytes), and replays it to every retry with `Idempotent-Replayed: true`, per
 * the IETF Idempotency-Key draft (see `@effect-idempotency/http` for every rule).
 *
 * A route opts in by piping its handler through the middleware; the other routes are untouched:
 *
 * The app then needs an `IdempotencyStore` (memory, PostgreSQL, DynamoDB, Redis). Applied to a
 * whole app (`HttpServer.serve(app, idempotent)`), it covers every `POST` and `PATCH` route.
 *
 * @example
 * ```ts
 * import { IdempotencyMiddleware } from "@effect-idempotency/platform"
 * import { HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
 * import { Effect, Schema } from "effect"
 *
 * const createOrder = Effect.gen(function*() {
 *   const order = yield* HttpServerRequest.schemaBodyJson(Schema.Struct({ sku: Schema.String }))
 *   return yield* HttpServerResponse.json({ id: "order-1", ...order }, { status: 201 })
 * })
 * const getOrder = HttpServerResponse.json({ id: "order-1", sku: "A-1" })
 *
 * const idempotent = IdempotencyMiddleware.make({ name: "orders" })
 *
 * const router = HttpRouter.empty.pipe(
 *   HttpRouter.post("/orders", createOrder.pipe(idempotent)),
 *   HttpRouter.get("/orders/:id", getOrder)
 * )
 * ```
 *
 * @since 0.1.0
 */
import type { IdempotencyStore } from "@effect-idempotency/core"
import { HttpIdempotency } from "@effect-idempotency/http"
import type * as HttpApp from "@effect/platform/HttpApp"
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import type * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as operation from "./internal/operation.js"
import * as internal from "./internal/protect.js"

/**
 * The options of the middleware: those of the engine (`HttpIdempotency.Options`: the methods, the
 * key, the fingerprint, the sizes, the response policy, the core's settings), and the scope.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<E = never, R = never> extends HttpIdempotency.Options {
  /**
   * A tenant or principal id of a request (from its credentials, for example): keys of different
   * scopes never share a record. Its failure is the app's failure (an `Unauthorized`, say), and no
   * store is touched. Default: none.
   */
  readonly scope?:
    | ((request: HttpServerRequest.HttpServerRequest) => Effect.Effect<string | undefined, E, R>)
    | undefined
}

/**
 * An app made idempotent by the middleware (a route's handler, or a whole app), that exposes its
 * operation (see `HttpIdempotency.Operation`): the middleware's engine around this app, one request
 * at a time, for `RetryProperty` (`operation: route.operation`). The request runs through the app as
 * it is, in a scope of its own; a handler that reads route parameters needs a `RouteContext` from
 * the property's `services`.
 *
 * @since 0.1.0
 * @category models
 */
export interface IdempotentApp<E, R> extends HttpApp.Default<E, R> {
  readonly operation: HttpIdempotency.Operation<
    E,
    Exclude<R, HttpServerRequest.HttpServerRequest | Scope.Scope | IdempotencyStore.IdempotencyStore>
  >
}

/**
 * An idempotency middleware: it keeps the app's errors and requirements and adds the
 * `IdempotencyStore` (and the scope's).
 *
 * @since 0.1.0
 * @category models
 */
export interface IdempotencyMiddleware<E2, R2> {
  <E, R>(app: HttpApp.Default<E, R>): IdempotentApp<E | E2, R | R2 | IdempotencyStore.IdempotencyStore>
}

/**
 * Builds the middleware. Its engine (the options, the allow-list, the operation) is built here,
 * once; a request only looks them up.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <E2 = never, R2 = never>(options?: Options<E2, R2>): IdempotencyMiddleware<E2, R2> => {
  const engine = HttpIdempotency.make(options)
  const scope = options?.scope
  return (app) => {
    const idempotentApp = internal.protect(engine, app, { scope })
    return Object.assign(idempotentApp, {
      operation: operation.make(engine.name, idempotentApp, { header: options?.header })
    })
  }
}
