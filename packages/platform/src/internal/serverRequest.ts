import { HttpIdempotencyError } from "@effect-idempotency/http"
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Headers from "@effect/platform/Headers"
import * as HttpIncomingMessage from "@effect/platform/HttpIncomingMessage"
import type * as HttpMethod from "@effect/platform/HttpMethod"
import * as HttpServerError from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Multipart from "@effect/platform/Multipart"
import type * as Path from "@effect/platform/Path"
import type * as Socket from "@effect/platform/Socket"
import * as UrlParams from "@effect/platform/UrlParams"
import * as Effect from "effect/Effect"
import * as Inspectable from "effect/Inspectable"
import type * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"

const decoder = new TextDecoder()

/**
 * A request whose body was read: every body accessor serves the bytes read (as often as asked),
 * everything else is the original request's.
 *
 * @internal
 */
export class BufferedRequest extends Inspectable.Class implements HttpServerRequest.HttpServerRequest {
  readonly [HttpServerRequest.TypeId]: HttpServerRequest.TypeId
  readonly [HttpIncomingMessage.TypeId]: HttpIncomingMessage.TypeId
  constructor(readonly original: HttpServerRequest.HttpServerRequest, readonly bytes: Uint8Array) {
    super()
    this[HttpServerRequest.TypeId] = HttpServerRequest.TypeId
    this[HttpIncomingMessage.TypeId] = HttpIncomingMessage.TypeId
  }
  toJSON(): unknown {
    return this.original.toJSON()
  }
  get source(): unknown {
    return this.original.source
  }
  get url(): string {
    return this.original.url
  }
  get originalUrl(): string {
    return this.original.originalUrl
  }
  get method(): HttpMethod.HttpMethod {
    return this.original.method
  }
  get cookies() {
    return this.original.cookies
  }
  get headers(): Headers.Headers {
    return this.original.headers
  }
  get remoteAddress(): Option.Option<string> {
    return this.original.remoteAddress
  }
  get upgrade(): Effect.Effect<Socket.Socket, HttpServerError.RequestError> {
    return this.original.upgrade
  }
  modify(options: {
    readonly url?: string
    readonly headers?: Headers.Headers
    readonly remoteAddress?: string
  }): HttpServerRequest.HttpServerRequest {
    return new BufferedRequest(this.original.modify(options), this.bytes)
  }
  private decodeError(cause: unknown) {
    return new HttpServerError.RequestError({ request: this, reason: "Decode", cause })
  }
  get stream(): Stream.Stream<Uint8Array, HttpServerError.RequestError> {
    return Stream.succeed(this.bytes)
  }
  get text(): Effect.Effect<string, HttpServerError.RequestError> {
    return Effect.sync(() => decoder.decode(this.bytes))
  }
  get json(): Effect.Effect<unknown, HttpServerError.RequestError> {
    return Effect.tryMap(this.text, {
      try: (text) => text === "" ? null : JSON.parse(text) as unknown,
      catch: (cause) => this.decodeError(cause)
    })
  }
  get urlParamsBody(): Effect.Effect<UrlParams.UrlParams, HttpServerError.RequestError> {
    return Effect.flatMap(this.text, (text) =>
      Effect.try({
        try: () => UrlParams.fromInput(new URLSearchParams(text)),
        catch: (cause) => this.decodeError(cause)
      }))
  }
  get arrayBuffer(): Effect.Effect<ArrayBuffer, HttpServerError.RequestError> {
    return Effect.sync(() =>
      this.bytes.buffer.slice(this.bytes.byteOffset, this.bytes.byteOffset + this.bytes.byteLength) as ArrayBuffer
    )
  }
  get multipartStream(): Stream.Stream<Multipart.Part, Multipart.MultipartError> {
    return Stream.pipeThroughChannel(Stream.succeed(this.bytes), Multipart.makeChannel(this.headers))
  }
  get multipart(): Effect.Effect<
    Multipart.Persisted,
    Multipart.MultipartError,
    Scope.Scope | FileSystem.FileSystem | Path.Path
  > {
    return Multipart.toPersisted(this.multipartStream)
  }
}

/**
 * The bytes of `chunks` (`size` in all) as one array; a single chunk is returned as it is.
 *
 * @internal
 */
export const concat = (chunks: ReadonlyArray<Uint8Array>, size: number): Uint8Array => {
  if (chunks.length === 1) return chunks[0]!
  const bytes = new Uint8Array(size)
  let offset = 0
  for (const chunk of chunks) {
    bytes.set(chunk, offset)
    offset += chunk.byteLength
  }
  return bytes
}

const unreadable = () =>
  new HttpIdempotencyError.InvalidRequestBody({ reason: "Unreadable", detail: "the body could not be read" })

/**
 * Reads a request's body, keeping at most `limit` bytes of it. A declared length past the limit is
 * refused without reading. A body without a declared length (chunked) that turns out longer is read
 * to its end and discarded, so the 413 can be answered on the connection.
 *
 * @internal
 */
export const readBody = (
  request: HttpServerRequest.HttpServerRequest,
  limit: number
): Effect.Effect<Uint8Array, HttpIdempotencyError.RequestBodyTooLarge | HttpIdempotencyError.InvalidRequestBody> => {
  const tooLarge = () => new HttpIdempotencyError.RequestBodyTooLarge({ limitBytes: limit })
  const declared = request.headers["content-length"]
  if (declared !== undefined) {
    const length = Number(declared)
    if (!Number.isFinite(length)) return Effect.fail(unreadable())
    if (length > limit) return Effect.fail(tooLarge())
    return request.arrayBuffer.pipe(
      Effect.mapError(unreadable),
      Effect.flatMap((buffer) =>
        buffer.byteLength > limit ? Effect.fail(tooLarge()) : Effect.succeed(new Uint8Array(buffer))
      )
    )
  }
  return Effect.suspend(() => {
    const chunks: Array<Uint8Array> = []
    let size = 0
    return Stream.runForEach(request.stream, (chunk) =>
      Effect.sync(() => {
        size += chunk.byteLength
        if (size <= limit) chunks.push(chunk)
      })).pipe(
        // a request without a body has no stream where the request is a web `Request`
        Effect.catchAll((error) => size === 0 ? Effect.asVoid(request.arrayBuffer) : Effect.fail(error)),
        Effect.mapError(unreadable),
        Effect.flatMap(() => size > limit ? Effect.fail(tooLarge()) : Effect.succeed(concat(chunks, size)))
      )
  })
}
