/**
 * Operations from `Schema.TaggedRequest` classes, as `@effect/rpc` and `RequestResolver` users
 * already write them: the payload, the success and the failure in one class, typed end to end.
 * And one operation in the `Effect.fn` style.
 */
import { Idempotency, IdempotencyContext, IdempotencyStore } from "@effect-idempotency/core"
import { Effect, Schema } from "effect"

export class Order extends Schema.Class<Order>("Order")({ orderId: Schema.String, sku: Schema.String }) {}
export class OutOfStock extends Schema.TaggedError<OutOfStock>()("OutOfStock", { sku: Schema.String }) {}
export class OrderNotFound extends Schema.TaggedError<OrderNotFound>()("OrderNotFound", { orderId: Schema.String }) {}

export class CreateOrder extends Schema.TaggedRequest<CreateOrder>()("CreateOrder", {
  payload: { sku: Schema.String, quantity: Schema.Int },
  success: Order,
  failure: OutOfStock
}) {}

export class CancelOrder extends Schema.TaggedRequest<CancelOrder>()("CancelOrder", {
  payload: { orderId: Schema.String },
  success: Schema.Struct({ cancelled: Schema.Boolean }),
  failure: Schema.Union(OrderNotFound, OutOfStock)
}) {}

const stock = new Map([["A-1", 5]])

// operation "CreateOrder": (request, { key }) => Effect<Order, OutOfStock | IdempotencyError, IdempotencyStore>
export const createOrder = Idempotency.handler(CreateOrder, (request) =>
  Effect.gen(function*() {
    const left = stock.get(request.sku) ?? 0
    if (left < request.quantity) return yield* new OutOfStock({ sku: request.sku })
    stock.set(request.sku, left - request.quantity)
    const key = yield* IdempotencyContext.stepKey("orders")
    return new Order({ orderId: `order-${key.slice(0, 8)}`, sku: request.sku })
  }))

// operation "CancelOrder", with a failure union
export const cancelOrder = Idempotency.handler(
  CancelOrder,
  (request) =>
    request.orderId.startsWith("order-")
      ? Effect.succeed({ cancelled: true })
      : Effect.fail(new OrderNotFound({ orderId: request.orderId })),
  { ttl: "1 hour" }
)

// the Effect.fn style: a generator body, the span named "ship-order"
export const shipOrder = Idempotency.fn("ship-order", {
  payload: Schema.Struct({ orderId: Schema.String }),
  success: Schema.Struct({ trackingId: Schema.String })
})(function*(shipment) {
  const key = yield* IdempotencyContext.stepKey("carrier")
  yield* Effect.log(`ship ${shipment.orderId} (Idempotency-Key: ${key})`)
  return { trackingId: `track-${key.slice(0, 8)}` }
})

export const program = Effect.gen(function*() {
  const request = new CreateOrder({ sku: "A-1", quantity: 2 })
  const order = yield* createOrder(request, { key: "create-1" })
  const again = yield* Idempotency.result(createOrder(request, { key: "create-1" }))
  const soldOut = yield* Effect.flip(createOrder(new CreateOrder({ sku: "A-1", quantity: 10 }), { key: "create-2" }))
  const cancelled = yield* cancelOrder(new CancelOrder({ orderId: order.orderId }), { key: "cancel-1" })
  const shipped = yield* shipOrder.run({ key: "ship-1", payload: { orderId: order.orderId } })
  return { order, again, soldOut, cancelled, shipped, stockLeft: stock.get("A-1") }
}).pipe(Effect.provide(IdempotencyStore.layerMemoryWith({ warn: false })))
