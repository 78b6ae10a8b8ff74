import { assert, describe, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import { ExpiryQueue } from "../src/store/expiryQueue.js"

describe("ExpiryQueue", () => {
  it.prop("pops entries in expiry order, interleaved with pushes", [
    FastCheck.array(FastCheck.oneof(FastCheck.integer({ min: 0, max: 1000 }), FastCheck.constant("pop" as const)), {
      maxLength: 200
    })
  ], ([operations]) => {
    const queue = new ExpiryQueue()
    const model: Array<number> = []
    for (const [i, operation] of operations.entries()) {
      if (operation === "pop") {
        if (model.length === 0) continue
        model.sort((a, b) => a - b)
        const expected = model.shift()!
        assert.strictEqual(queue.peek(), expected)
        const id = queue.pop()
        assert.strictEqual(Number(id.split(":")[0]), expected)
      } else {
        queue.push(operation, `${operation}:${i}`)
        model.push(operation)
      }
      assert.strictEqual(queue.size, model.length)
    }
    assert.strictEqual(queue.peek(), model.length === 0 ? Infinity : Math.min(...model))
  }, { fastCheck: { numRuns: 1000 } })
})
