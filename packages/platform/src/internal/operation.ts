import type { IdempotencyStore } from "@effect-idempotency/core"
import { HttpIdempotency } from "@effect-idempotency/http"
import type * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { currentOperation } from "./protect.js"

/**
 * The operation of an idempotent route (see `HttpIdempotency.Operation`): each request is made into
 * a server request and run through `app`, the app as it is deployed, in a scope of its own; the
 * idempotent route it reaches reports the engine's answer, which is the operation's result.
 *
 * @internal
 */
export const make = <E, R>(
  name: string,
  app: HttpApp.Default<E, R>,
  route: {
    readonly header?: string | undefined
    readonly method?: string | undefined
    readonly path?: string | undefined
  }
): HttpIdempotency.Operation<
  E,
  Exclude<R, HttpServerRequest.HttpServerRequest | Scope.Scope | IdempotencyStore.IdempotencyStore>
> =>
  HttpIdempotency.operation(name, (request, cutOff) =>
    Effect.suspend(() => {
      let answer: HttpIdempotency.Answer<unknown> | undefined
      const report = (reported: HttpIdempotency.Answer<unknown>) => {
        answer = reported
      }
      return app.pipe(
        Effect.provideService(
          HttpServerRequest.HttpServerRequest,
          HttpServerRequest.fromWeb(HttpIdempotency.webRequest(request, route))
        ),
        Effect.locally(currentOperation, { cutOff, scope: request.scope, report }),
        Effect.scoped,
        Effect.flatMap((): Effect.Effect<HttpIdempotency.Answer<unknown>> =>
          answer === undefined
            ? Effect.dieMessage(`${name}: the request did not reach an idempotent route (its method, its path?)`)
            : Effect.succeed(answer)
        )
      )
    })) as HttpIdempotency.Operation<
      E,
      Exclude<R, HttpServerRequest.HttpServerRequest | Scope.Scope | IdempotencyStore.IdempotencyStore>
    >
