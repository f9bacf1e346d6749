package forge

import (
	"net/http"
	"slices"
)

// Route is one forge a webhook serves on its single endpoint.
type Route struct {
	// Forge is the name its receiver gives its deliveries
	// (Delivery.Forge).
	Forge string
	// Header is a header only this forge's deliveries carry
	// (X-GitHub-Event, X-Gitlab-Event).
	Header   string
	Receiver Receiver
	// Secret verifies this forge's deliveries; nil is the secret the
	// caller passes to Verify.
	Secret []byte
}

// Routes is a Receiver of several forges' deliveries on one endpoint:
// each request goes to the first route whose Header it carries (a
// request carrying none, to the first route, which refuses it unsigned),
// and is verified with that forge's own secret, so that one forge's
// secret never verifies another's deliveries.
type Routes []Route

var _ Receiver = Routes(nil)

func (rs Routes) route(h http.Header) Route {
	for _, r := range rs {
		if h.Get(r.Header) != "" {
			return r
		}
	}
	return rs[0]
}

func (rs Routes) byForge(d Delivery) (Route, bool) {
	for _, r := range rs {
		if r.Forge == d.Forge {
			return r, true
		}
	}
	return Route{}, false
}

// Delivery implements Receiver.
func (rs Routes) Delivery(h http.Header) (Delivery, error) { return rs.route(h).Receiver.Delivery(h) }

// Verify implements Receiver with the route's secret, else secret.
func (rs Routes) Verify(d Delivery, body func(yield func([]byte)), secret []byte) bool {
	r, ok := rs.byForge(d)
	if !ok {
		return false
	}
	if r.Secret != nil {
		secret = r.Secret
	}
	return r.Receiver.Verify(d, body, secret)
}

// Decode implements Receiver.
func (rs Routes) Decode(d Delivery, contentType string, body []byte) (Event, error) {
	r, ok := rs.byForge(d)
	if !ok {
		return Event{}, &DecodeError{Status: http.StatusBadRequest, Err: ErrUnsigned}
	}
	return r.Receiver.Decode(d, contentType, body)
}

// ForwardHeader implements Receiver: any route's headers.
func (rs Routes) ForwardHeader(canonical string) bool {
	return slices.ContainsFunc(rs, func(r Route) bool { return r.Receiver.ForwardHeader(canonical) })
}
