import { RequestBodyTooLarge } from "../HttpIdempotencyError.js"
import { bodyInit } from "../StoredResponse.js"

const concat = (chunks: ReadonlyArray<Uint8Array>, size: number): Uint8Array => {
  if (chunks.length === 1) return chunks[0]!
  const bytes = new Uint8Array(size)
  let offset = 0
  for (const chunk of chunks) {
    bytes.set(chunk, offset)
    offset += chunk.byteLength
  }
  return bytes
}

/**
 * The rest past the limit is left unread, not cancelled: a Node adapter that destroys the request on
 * cancel takes the connection with it, before the 413 is written.
 *
 * @internal
 */
export const readRequestBody = async (request: Request, limit: number): Promise<Uint8Array | RequestBodyTooLarge> => {
  const declared = Number(request.headers.get("content-length") ?? Number.NaN)
  if (Number.isFinite(declared) && declared > limit) return new RequestBodyTooLarge({ limitBytes: limit })
  if (request.body === null) return new Uint8Array(0)
  const reader = request.body.getReader()
  const chunks: Array<Uint8Array> = []
  let size = 0
  while (true) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.byteLength
    if (size > limit) {
      reader.releaseLock()
      return new RequestBodyTooLarge({ limitBytes: limit })
    }
    chunks.push(value)
  }
  return concat(chunks, size)
}

/**
 * A response past `limit` is answered as it streams, rebuilt over what was read, and never kept.
 *
 * @internal
 */
export const captureResponse = async (response: Response, limit: number): Promise<{
  readonly headers: Record<string, string>
  readonly body: Uint8Array | undefined
  readonly response: Response
}> => {
  const headers: Record<string, string> = {}
  response.headers.forEach((value, name) => {
    headers[name] = value
  })
  const init = { status: response.status, statusText: response.statusText, headers: response.headers }
  if (response.body === null) return { headers, body: new Uint8Array(0), response }
  const reader = response.body.getReader()
  const chunks: Array<Uint8Array> = []
  let size = 0
  while (size <= limit) {
    const { done, value } = await reader.read()
    if (done) {
      const body = concat(chunks, size)
      return { headers, body, response: new Response(bodyInit(body), init) }
    }
    size += value.byteLength
    chunks.push(value)
  }
  let index = 0
  const rest = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (index < chunks.length) {
        controller.enqueue(chunks[index++]!)
        return
      }
      const { done, value } = await reader.read()
      if (done) controller.close()
      else controller.enqueue(value)
    },
    cancel(reason) {
      return reader.cancel(reason)
    }
  })
  return { headers, body: undefined, response: new Response(rest, init) }
}
