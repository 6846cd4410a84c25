package vigil

// ReceiptStore is the part of Store that records push deliveries: one
// receipt per (watch, channel). See SPEC §5.
type ReceiptStore interface{}
