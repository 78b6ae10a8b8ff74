/**
 * The orders API: an `HttpApi` whose `POST /orders` is idempotent. A client sends an
 * `Idempotency-Key` with each new order; a retry with the same key gets the order the first request
 * created (`Idempotent-Replayed: true`), never a second one.
 */
import { IdempotencyHttpApi } from "@effect-idempotency/platform"
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"

export const NewOrder = Schema.Struct({
  sku: Schema.NonEmptyTrimmedString,
  quantity: Schema.Int.pipe(Schema.positive())
})

export class Order extends Schema.Class<Order>("Order")({
  id: Schema.String,
  sku: Schema.String,
  quantity: Schema.Int,
  createdAt: Schema.String
}) {}

export class OutOfStock extends Schema.TaggedError<OutOfStock>()(
  "OutOfStock",
  { sku: Schema.String },
  HttpApiSchema.annotations({ status: 409, description: "The SKU is out of stock" })
) {}

export class OrderNotFound extends Schema.TaggedError<OrderNotFound>()(
  "OrderNotFound",
  { id: Schema.String },
  HttpApiSchema.annotations({ status: 404 })
) {}

export class Orders extends HttpApiGroup.make("orders")
  .add(
    HttpApiEndpoint.post("create", "/orders")
      .setPayload(NewOrder)
      .addSuccess(Order, { status: 201 })
      .addError(OutOfStock)
      .annotate(OpenApi.Description, "Creates an order: once per Idempotency-Key")
      .pipe(IdempotencyHttpApi.idempotent())
  )
  .add(HttpApiEndpoint.get("list", "/orders").addSuccess(Schema.Array(Order)))
  .add(
    HttpApiEndpoint.get("get", "/orders/:id")
      .setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(Order)
      .addError(OrderNotFound)
  )
{}

export class OrdersApi extends HttpApi.make("orders-api").add(Orders).annotate(OpenApi.Title, "Orders API") {}
