/**
 * Idempotent routes for `@effect/platform`'s `HttpApp` and `HttpRouter`: a route opts in by piping
 * its handler through the middleware (README.md#an-httprouter-route).
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
 * The options of the protocol (`HttpIdempotency.Options`), and the scope.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<E = never, R = never> extends HttpIdempotency.Options {
  readonly scope?:
    | ((request: HttpServerRequest.HttpServerRequest) => Effect.Effect<string | undefined, E, R>)
    | undefined
}

/**
 * An app made idempotent, with its `operation` for `RetryProperty`.
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
 * It keeps the app's errors and requirements, and adds the `IdempotencyStore` (and the scope's).
 *
 * @since 0.1.0
 * @category models
 */
export interface IdempotencyMiddleware<E2, R2> {
  <E, R>(app: HttpApp.Default<E, R>): IdempotentApp<E | E2, R | R2 | IdempotencyStore.IdempotencyStore>
}

/**
 * Builds the middleware; its protocol is built here, once.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <E2 = never, R2 = never>(options?: Options<E2, R2>): IdempotencyMiddleware<E2, R2> => {
  const protocol = HttpIdempotency.make(options)
  const scope = options?.scope
  return (app) => {
    const idempotentApp = internal.protect(protocol, app, { scope })
    return Object.assign(idempotentApp, {
      operation: operation.make(protocol.name, idempotentApp, { header: options?.header })
    })
  }
}
