/**
 * The response as an idempotent route records and replays it, and the problem responses of failures.
 *
 * @since 0.1.0
 */
import type { IdempotencyError } from "@effect-idempotency/core"
import type { RequestFailure } from "./HttpIdempotencyError.js"
import { httpStatus } from "./HttpIdempotencyError.js"

/**
 * The header set on a replayed response.
 *
 * @since 0.1.0
 * @category constants
 */
export const REPLAYED_HEADER = "Idempotent-Replayed"

/**
 * A response as data; header names are lower case.
 *
 * @since 0.1.0
 * @category models
 */
export interface StoredResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: Uint8Array
}

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/**
 * A response from its parts.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: {
  readonly status: number
  readonly headers?: Readonly<Record<string, string>> | undefined
  readonly body?: Uint8Array | string | undefined
}): StoredResponse => ({
  status: options.status,
  headers: options.headers ?? {},
  body: typeof options.body === "string" ? encoder.encode(options.body) : options.body ?? new Uint8Array(0)
})

/**
 * The body as UTF-8 text.
 *
 * @since 0.1.0
 * @category getters
 */
export const text = (self: StoredResponse): string => decoder.decode(self.body)

/**
 * Adds headers (names are lower-cased).
 *
 * @since 0.1.0
 * @category utils
 */
export const setHeaders = (self: StoredResponse, headers: Readonly<Record<string, string>>): StoredResponse => {
  const merged: Record<string, string> = { ...self.headers }
  for (const name in headers) merged[name.toLowerCase()] = headers[name]!
  return { status: self.status, headers: merged, body: self.body }
}

/**
 * Marks a response as replayed (`Idempotent-Replayed: true`).
 *
 * @since 0.1.0
 * @category utils
 */
export const markReplayed = (self: StoredResponse): StoredResponse => ({
  status: self.status,
  headers: { ...self.headers, "idempotent-replayed": "true" },
  body: self.body
})

/**
 * The headers of an idempotent route's answers that a browser's script needs to read.
 *
 * @since 0.1.0
 * @category constants
 */
export const EXPOSED_HEADERS: ReadonlyArray<string> = [REPLAYED_HEADER, "Retry-After"]

/**
 * An `Access-Control-Expose-Headers` value with `EXPOSED_HEADERS` merged in: each name once, whatever its case,
 * in the order first seen.
 *
 * @since 0.1.0
 * @category utils
 */
export const exposeHeaders = (current: string | null | undefined): string => {
  const names: Array<string> = []
  const seen = new Set<string>()
  for (const name of [...(current ?? "").split(","), ...EXPOSED_HEADERS]) {
    const trimmed = name.trim()
    if (trimmed === "" || seen.has(trimmed.toLowerCase())) continue
    seen.add(trimmed.toLowerCase())
    names.push(trimmed)
  }
  return names.join(", ")
}

/**
 * A CORS response (one with `Access-Control-Allow-Origin`) that exposes `EXPOSED_HEADERS`; any other as it is.
 *
 * @since 0.1.0
 * @category utils
 */
export const withExposedHeaders = (self: StoredResponse): StoredResponse =>
  self.headers["access-control-allow-origin"] === undefined
    ? self
    : setHeaders(self, {
      "access-control-expose-headers": exposeHeaders(self.headers["access-control-expose-headers"])
    })

/**
 * Whether a response carries `Idempotent-Replayed: true`.
 *
 * @since 0.1.0
 * @category utils
 */
export const isReplayed = (self: StoredResponse): boolean => self.headers["idempotent-replayed"] === "true"

const reasons: Record<number, string> = {
  400: "Bad Request",
  409: "Conflict",
  413: "Content Too Large",
  422: "Unprocessable Content",
  500: "Internal Server Error",
  503: "Service Unavailable",
  504: "Gateway Timeout"
}

/**
 * Options of a problem response.
 *
 * @since 0.1.0
 * @category models
 */
export interface ProblemOptions {
  /** Default: the status's reason phrase. */
  readonly title?: string | undefined
  /** The problem's `type`, with a `Link` header. Default: `about:blank`, no link. */
  readonly documentation?: string | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
}

/**
 * An RFC 9457 problem response: `{ type, title, status, detail }` as `application/problem+json`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const problem = (status: number, detail: string, options?: ProblemOptions): StoredResponse => {
  const documentation = options?.documentation
  const headers: Record<string, string> = { "content-type": "application/problem+json" }
  if (documentation !== undefined) headers["link"] = `<${documentation}>; rel="describedby"`
  const response = make({
    status,
    headers,
    body: JSON.stringify({
      type: documentation ?? "about:blank",
      title: options?.title ?? reasons[status] ?? "Error",
      status,
      detail
    })
  })
  return options?.headers === undefined ? response : setHeaders(response, options.headers)
}

/**
 * The `Retry-After` value of a conflict: whole seconds, rounded up.
 *
 * @since 0.1.0
 * @category utils
 */
export const retryAfterSeconds = (error: IdempotencyError.IdempotencyConflict): number =>
  Math.max(0, Math.ceil(error.retryAfterMillis / 1000))

/**
 * The problem response of a failure (README.md#what-a-request-gets, Titles).
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromError = (
  error: RequestFailure,
  options?: { readonly documentation?: string | undefined }
): StoredResponse => {
  const status = httpStatus(error)
  const documentation = options?.documentation
  const documented = (title: string, headers?: Readonly<Record<string, string>>): ProblemOptions =>
    documentation === undefined ? { headers } : { title, documentation, headers }
  switch (error._tag) {
    case "MissingIdempotencyKey":
      return problem(status, error.message, documented("Idempotency-Key is missing"))
    case "InvalidIdempotencyKey":
      return problem(status, error.message, documented("Idempotency-Key is invalid"))
    case "KeyReused":
      return problem(status, error.message, documented("Idempotency-Key is already used"))
    case "IdempotencyConflict":
      return problem(
        status,
        error.message,
        documented("A request is outstanding for this Idempotency-Key", {
          "retry-after": String(retryAfterSeconds(error))
        })
      )
    case "DownstreamTimeout":
      return error.replayed ? markReplayed(problem(status, error.message)) : problem(status, error.message)
    case "OutcomeNotReplayable":
      return error.replayed
        ? markReplayed(
          problem(
            status,
            "This request was processed, but its response could not be kept for replay; it is not processed again"
          )
        )
        : problem(status, error.message)
    case "StoredOutcomeInvalid":
      return problem(status, "The stored response of this request could not be replayed")
    default:
      return problem(status, error.message)
  }
}

const nullBodyStatuses = new Set([101, 103, 204, 205, 304])

/**
 * A web `Response` of a stored response.
 *
 * @since 0.1.0
 * @category conversions
 */
export const toWeb = (self: StoredResponse): Response =>
  new Response(nullBodyStatuses.has(self.status) ? null : bodyInit(self.body), {
    status: self.status,
    headers: self.headers
  })

/**
 * Bytes as a web body (every `Uint8Array` this library makes is backed by an `ArrayBuffer`).
 *
 * @since 0.1.0
 * @category conversions
 */
export const bodyInit = (bytes: Uint8Array): BodyInit => bytes as Uint8Array<ArrayBuffer>
