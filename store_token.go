package vigil

// TokenStore is the part of Store that keeps scoped API tokens, hashed.
// See SPEC §9.
type TokenStore interface{}
