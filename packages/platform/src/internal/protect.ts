import type { IdempotencyStore } from "@effect-idempotency/core"
import type { HttpIdempotency, HttpIdempotencyError } from "@effect-idempotency/http"
import { StoredResponse } from "@effect-idempotency/http"
import * as Headers from "@effect/platform/Headers"
import type * as HttpApp from "@effect/platform/HttpApp"
import * as HttpBody from "@effect/platform/HttpBody"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberRef from "effect/FiberRef"
import { identity } from "effect/Function"
import { globalValue } from "effect/GlobalValue"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { BufferedRequest, concat, readBody } from "./serverRequest.js"

const encoder = new TextEncoder()

/** Past `limit`, the part read is answered, followed by the rest of the stream, never kept. */
const captureStream = (
  response: HttpServerResponse.HttpServerResponse,
  body: HttpBody.Stream,
  limit: number
): Effect.Effect<HttpIdempotency.Captured<HttpServerResponse.HttpServerResponse>> => {
  const captured = (original: HttpServerResponse.HttpServerResponse, bytes: Uint8Array | undefined) => ({
    status: original.status,
    headers: original.headers,
    body: bytes,
    original
  })
  if (body.contentLength !== undefined && body.contentLength > limit) {
    return Effect.succeed(captured(response, undefined))
  }
  return Effect.flatMap(Scope.make(), (scope) =>
    Effect.gen(function*() {
      const pull = yield* Scope.extend(Stream.toPull(body.stream), scope)
      const chunks: Array<Uint8Array> = []
      let size = 0
      while (size <= limit) {
        const next = yield* Effect.either(pull)
        if (Either.isLeft(next)) {
          yield* Scope.close(scope, Exit.void)
          if (Option.isSome(next.left)) return yield* Effect.die(next.left.value)
          const bytes = concat(chunks, size)
          return captured(
            HttpServerResponse.setBody(response, HttpBody.uint8Array(bytes, body.contentType)),
            bytes
          )
        }
        for (const chunk of next.right) {
          chunks.push(chunk)
          size += chunk.byteLength
        }
      }
      const rest = Stream.concat(Stream.fromChunk(Chunk.unsafeFromArray(chunks)), Stream.repeatEffectChunkOption(pull))
        .pipe(Stream.ensuring(Scope.close(scope, Exit.void)))
      return captured(
        HttpServerResponse.setBody(response, HttpBody.stream(rest, body.contentType, body.contentLength)),
        undefined
      )
    }).pipe(Effect.onExit((exit) => Exit.isSuccess(exit) ? Effect.void : Scope.close(scope, exit))))
}

/**
 * `body` is `undefined` for a body that cannot be read whole (a form, a raw stream).
 *
 * @internal
 */
export const capture = (
  response: HttpServerResponse.HttpServerResponse,
  limit: number
): Effect.Effect<HttpIdempotency.Captured<HttpServerResponse.HttpServerResponse>> => {
  const body = response.body
  const captured = (bytes: Uint8Array | undefined) =>
    Effect.succeed({ status: response.status, headers: response.headers, body: bytes, original: response })
  switch (body._tag) {
    case "Empty":
      return captured(new Uint8Array(0))
    case "Uint8Array":
      return captured(body.body)
    case "Raw":
      return captured(
        typeof body.body === "string"
          ? encoder.encode(body.body)
          : body.body instanceof Uint8Array
          ? body.body
          : undefined
      )
    case "FormData":
      return captured(undefined)
    case "Stream":
      return captureStream(response, body, limit)
  }
}

/** @internal */
export const fromStored = (stored: StoredResponse.StoredResponse): HttpServerResponse.HttpServerResponse => {
  const options = { status: stored.status, headers: Headers.fromInput(stored.headers) }
  if (stored.body.byteLength === 0) return HttpServerResponse.empty(options)
  const contentType = stored.headers["content-type"]
  // with its type, the body is sent with its length; without one, none is added
  return contentType === undefined
    ? HttpServerResponse.raw(stored.body, options)
    : HttpServerResponse.uint8Array(stored.body, { ...options, contentType })
}

/** A CORS response exposes the headers of the protocol's answers (README.md#browsers-and-cors of the http package). */
const exposing = (response: HttpServerResponse.HttpServerResponse): HttpServerResponse.HttpServerResponse => {
  if (response.headers["access-control-allow-origin"] === undefined) return response
  const current = response.headers["access-control-expose-headers"]
  const merged = StoredResponse.exposeHeaders(current)
  return merged === current ? response : HttpServerResponse.setHeader(response, "access-control-expose-headers", merged)
}

/**
 * Forked: a client that goes away does not interrupt the attempt (README.md#an-httprouter-route), and
 * an attempt started in `HttpApp.toHandled`'s uninterruptible region would wait for its watchdog forever.
 */
const detached = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(Effect.forkDaemon(Effect.interruptible(effect)), Fiber.join)

/**
 * A request run by a route's operation: its cut-off and scope replace the route's.
 *
 * @internal
 */
export interface OperationRun {
  readonly cutOff: number | undefined
  readonly scope: string | undefined
  readonly report: (answer: HttpIdempotency.Answer<unknown>) => void
}

/** @internal */
export const currentOperation = globalValue(
  Symbol.for("@effect-idempotency/platform/currentOperation"),
  () => FiberRef.unsafeMake<OperationRun | undefined>(undefined)
)

/** @internal */
export const protect = <E, R, E2, R2>(
  protocol: HttpIdempotency.HttpIdempotency,
  app: HttpApp.Default<E, R>,
  options: {
    readonly scope?:
      | ((request: HttpServerRequest.HttpServerRequest) => Effect.Effect<string | undefined, E2, R2>)
      | undefined
    /** The payload the handler will see, encoded, for the fingerprint; `None` where it cannot tell. */
    readonly payload?:
      | ((request: HttpServerRequest.HttpServerRequest, bytes: Uint8Array) => Effect.Effect<
        Option.Option<unknown>,
        HttpIdempotencyError.InvalidRequestBody
      >)
      | undefined
    /** A failure of the app answered as a response (HttpApi: the errors its schemas encode). */
    readonly encodeFailure?:
      | ((error: E) => Effect.Effect<Option.Option<HttpServerResponse.HttpServerResponse>>)
      | undefined
  }
): HttpApp.Default<E | E2, R | R2 | IdempotencyStore.IdempotencyStore> => {
  const scope = options.scope
  const payloadOf = options.payload
  const encodeFailure = options.encodeFailure
  const maxResponseBytes = protocol.maxResponseBytes
  const encoded: <X>(self: Effect.Effect<X, E, R>) => Effect.Effect<X | HttpServerResponse.HttpServerResponse, E, R> =
    encodeFailure === undefined ? (self) => self : (self) =>
      Effect.catchAll(self, (error) =>
        Effect.flatMap(
          encodeFailure(error),
          Option.match({ onNone: () => Effect.fail(error), onSome: Effect.succeed })
        ))
  return Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    if (!protocol.covers(request.method)) return app
    let buffered: HttpServerRequest.HttpServerRequest = request
    let bytesRead: Uint8Array = new Uint8Array(0)
    const url = request.url
    const query = url.indexOf("?")
    const downstream = Effect.suspend(() => Effect.provideService(app, HttpServerRequest.HttpServerRequest, buffered))
      .pipe(
        encoded,
        Effect.flatMap((response) => capture(response, maxResponseBytes))
      )
    return Effect.flatMap(FiberRef.get(currentOperation), (run) =>
      Effect.flatMap(
        // an operation's request is the attempt: a platform that stops it stops the handler too
        (run === undefined ? detached : identity)(
          protocol.handle<HttpServerResponse.HttpServerResponse, E | E2, R | R2>(
            {
              method: request.method,
              path: query === -1 ? url : url.slice(0, query),
              query: query === -1 ? "" : url.slice(query),
              header: (name) => request.headers[name],
              body: Effect.tap(readBody(request, protocol.maxBodyBytes), (bytes) => {
                bytesRead = bytes
                buffered = new BufferedRequest(request, bytes)
              }),
              cutOff: run?.cutOff,
              scope: run?.scope !== undefined
                ? Effect.succeed(run.scope)
                : scope === undefined
                ? undefined
                : scope(request),
              payload: payloadOf === undefined ? undefined : Effect.suspend(() => payloadOf(request, bytesRead))
            },
            downstream
          )
        ),
        (answer) => {
          run?.report(answer)
          switch (answer._tag) {
            case "Bypass":
              return app
            case "Fresh":
              return Effect.succeed(exposing(answer.value))
            case "Replayed":
            case "Rejected":
              return Effect.succeed(exposing(fromStored(answer.response)))
          }
        }
      ))
  })
}
