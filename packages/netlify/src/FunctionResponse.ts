/**
 * The response of a function, as data: a status, headers and a text body.
 *
 * @since 0.1.0
 */
import type { IdempotencyError } from "@effect-idempotency/core"
import { HttpIdempotency, StoredResponse } from "@effect-idempotency/http"
import * as Schema from "effect/Schema"
import type { NetlifyError } from "./NetlifyError.js"

/**
 * The header set on a replayed response.
 *
 * @since 0.1.0
 * @category constants
 */
export const REPLAYED_HEADER = StoredResponse.REPLAYED_HEADER

/**
 * The headers a stored response keeps by default (`HttpIdempotency.DEFAULT_STORED_HEADERS`).
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_STORED_HEADERS: ReadonlyArray<string> = HttpIdempotency.DEFAULT_STORED_HEADERS

/**
 * A function response; header names are lower case.
 *
 * @since 0.1.0
 * @category models
 */
export class FunctionResponse extends Schema.Class<FunctionResponse>("@effect-idempotency/netlify/FunctionResponse")({
  status: Schema.Int.pipe(Schema.between(200, 599)),
  headers: Schema.Record({ key: Schema.String, value: Schema.String }),
  body: Schema.String
}) {}

/**
 * Options of the response constructors.
 *
 * @since 0.1.0
 * @category models
 */
export interface Init {
  readonly status?: number | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
}

const lowerCase = (headers: Readonly<Record<string, string>> | undefined): Record<string, string> => {
  const out: Record<string, string> = {}
  if (headers !== undefined) {
    for (const [name, value] of Object.entries(headers)) out[name.toLowerCase()] = value
  }
  return out
}

/**
 * A text response (default status 200, `text/plain`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const text = (body: string, init?: Init): FunctionResponse =>
  new FunctionResponse({
    status: init?.status ?? 200,
    headers: { "content-type": "text/plain; charset=utf-8", ...lowerCase(init?.headers) },
    body
  })

/**
 * A JSON response (default status 200).
 *
 * @since 0.1.0
 * @category constructors
 */
export const json = (value: unknown, init?: Init): FunctionResponse =>
  new FunctionResponse({
    status: init?.status ?? 200,
    headers: { "content-type": "application/json", ...lowerCase(init?.headers) },
    body: JSON.stringify(value) ?? "null"
  })

/**
 * A response without a body (default status 204).
 *
 * @since 0.1.0
 * @category constructors
 */
export const empty = (init?: Init): FunctionResponse =>
  new FunctionResponse({ status: init?.status ?? 204, headers: lowerCase(init?.headers), body: "" })

/**
 * Keeps the headers a stored response keeps.
 *
 * @since 0.1.0
 * @category utils
 */
export const selectHeaders = (response: FunctionResponse, names: ReadonlyArray<string>): FunctionResponse => {
  const keep = new Set(names.map((name) => name.toLowerCase()))
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(response.headers)) {
    if (keep.has(name)) headers[name] = value
  }
  return new FunctionResponse({ status: response.status, headers, body: response.body })
}

/**
 * Adds headers to a response.
 *
 * @since 0.1.0
 * @category utils
 */
export const setHeaders = (
  response: FunctionResponse,
  headers: Readonly<Record<string, string>>
): FunctionResponse =>
  new FunctionResponse({
    status: response.status,
    headers: { ...response.headers, ...lowerCase(headers) },
    body: response.body
  })

/**
 * Marks a response as replayed (`Idempotent-Replayed: true`).
 *
 * @since 0.1.0
 * @category utils
 */
export const markReplayed = (response: FunctionResponse): FunctionResponse =>
  setHeaders(response, { [REPLAYED_HEADER]: "true" })

/**
 * Whether a response carries `Idempotent-Replayed: true`.
 *
 * @since 0.1.0
 * @category utils
 */
export const isReplayed = (response: FunctionResponse): boolean =>
  response.headers[REPLAYED_HEADER.toLowerCase()] === "true"

const fromStored = (response: StoredResponse.StoredResponse): FunctionResponse =>
  new FunctionResponse({ status: response.status, headers: response.headers, body: StoredResponse.text(response) })

/**
 * An RFC 9457 problem response.
 *
 * @since 0.1.0
 * @category constructors
 */
export const problem = (status: number, detail: string, init?: Omit<Init, "status">): FunctionResponse =>
  fromStored(StoredResponse.problem(status, detail, { headers: lowerCase(init?.headers) }))

/**
 * The response of a failure, with its status (README.md#per-invocation).
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromError = (error: NetlifyError | IdempotencyError.IdempotencyError): FunctionResponse =>
  fromStored(StoredResponse.fromError(error))

/**
 * Converts a response to a web `Response`.
 *
 * @since 0.1.0
 * @category conversions
 */
export const toWeb = (response: FunctionResponse): Response =>
  new Response(response.status === 204 || response.status === 304 ? null : response.body, {
    status: response.status,
    headers: response.headers
  })
