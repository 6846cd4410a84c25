package httpapi

import (
	"net/http"
	"strconv"

	"github.com/vigil-run/vigil"
)

// messages serves GET /v1/recipients/{recipient}/messages: a mailbox read
// that long-polls up to wait (default 0: answer at once). HEAD answers at
// once and acks nothing.
func (s *Server) messages(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	mr := vigil.MessagesRequest{Recipient: r.PathValue("recipient")}
	if err := checkName("recipient", mr.Recipient); err != nil {
		return err
	}
	if v, ok := q["reader"]; ok {
		if err := checkName("reader", v[0]); err != nil {
			return err
		}
		mr.Reader = v[0]
	}
	if v, ok := q["after"]; ok {
		n, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil || n < 0 {
			return invalid("after", "after must be a non-negative whole number (a message seq), not %q", clip(v[0]))
		}
		mr.After = &n
	}
	var err error
	if mr.Ack, err = boolParam(q, "ack"); err != nil {
		return err
	}
	if mr.Ack && mr.Reader == "" {
		return invalid("reader", "ack=true needs a reader whose cursor to move")
	}
	if mr.Limit, err = limitParam(q); err != nil {
		return err
	}
	if mr.Wait, err = s.waitParam(w, q, "wait", 0); err != nil {
		return err
	}
	if r.Method == http.MethodHead {
		// ServeMux serves HEAD on this GET route. Its body is dropped,
		// so HEAD reads the page at once and moves no cursor.
		mr.Wait, mr.Ack = 0, false
	}
	ctx := r.Context()
	if mr.Wait > 0 {
		var done func()
		if ctx, done, err = s.track(w, r, &s.calls); err != nil {
			return err
		}
		defer done()
		noWriteDeadline(w)
	}
	page, err := s.svc.Messages(ctx, mr)
	if err != nil {
		return interrupted(ctx, err)
	}
	if page.Messages == nil {
		page.Messages = []*vigil.Message{}
	}
	return writeJSON(w, http.StatusOK, page)
}

// ackBody is the body of POST /v1/recipients/{recipient}/ack.
type ackBody struct {
	Reader string `json:"reader"`
	Seq    *int64 `json:"seq"`
}

// ack serves POST /v1/recipients/{recipient}/ack.
func (s *Server) ack(w http.ResponseWriter, r *http.Request) error {
	recipient := r.PathValue("recipient")
	if err := checkName("recipient", recipient); err != nil {
		return err
	}
	var b ackBody
	if err := decodeBody(r, &b); err != nil {
		return err
	}
	if err := checkName("reader", b.Reader); err != nil {
		return err
	}
	if b.Seq == nil || *b.Seq < 0 {
		return invalid("seq", "seq must be a non-negative whole number: the last message seq read")
	}
	if err := s.svc.Ack(r.Context(), vigil.AckRequest{Recipient: recipient, Reader: b.Reader, Seq: *b.Seq}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// closeRecipient serves POST /v1/recipients/{recipient}/close.
func (s *Server) closeRecipient(w http.ResponseWriter, r *http.Request) error {
	recipient := r.PathValue("recipient")
	if err := checkName("recipient", recipient); err != nil {
		return err
	}
	res, err := s.svc.CloseRecipient(r.Context(), recipient)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, res)
}

// note serves POST /v1/recipients/{recipient}/notes: a note left in the
// mailbox without a watch.
func (s *Server) note(w http.ResponseWriter, r *http.Request) error {
	nr := vigil.NoteRequest{Recipient: r.PathValue("recipient")}
	if err := checkName("recipient", nr.Recipient); err != nil {
		return err
	}
	if err := decodeBody(r, &nr); err != nil {
		return err
	}
	m, err := s.svc.Note(r.Context(), nr)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, m)
}
