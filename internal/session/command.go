package session

import (
	"errors"
	"fmt"
	"strings"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/policy"
)

// ErrUnknownCommand is returned for text that is not /exec or /elevated.
// (/approve ID DECISION is answered by the gateway, which holds the
// prompts, before text reaches the session store.)
var ErrUnknownCommand = errors.New("unknown command (accepted: /exec, /elevated, /approve)")

// Elevated modes accepted by /elevated.
var elevatedModes = []string{"on", "off", "ask", "full"}

// Command runs a slash command for the session and returns the reply and
// the session's settings afterwards. Invalid input changes nothing.
//
//	/exec                                  show the current overrides
//	/exec host=H security=S ask=A node=N   set overrides (any subset; "default" clears one)
//	/elevated on|ask|full                  host=gateway security=full (ask: ask=always; full: ask=off)
//	/elevated off                          restore the settings from before /elevated
func (s *Store) Command(k Key, text string) (bridge.SessionCommandResult, error) {
	fields := strings.Fields(strings.TrimSpace(text))
	if len(fields) == 0 {
		return bridge.SessionCommandResult{}, ErrUnknownCommand
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.get(k)
	var reply string
	switch strings.ToLower(fields[0]) {
	case "/exec":
		if len(fields) == 1 {
			reply = "exec overrides: " + describe(ss.overrides)
			break
		}
		next := ss.overrides
		for _, f := range fields[1:] {
			if err := apply(&next, f); err != nil {
				return bridge.SessionCommandResult{}, err
			}
		}
		ss.overrides = next
		reply = "exec overrides set: " + describe(next)
	case "/elevated":
		if len(fields) != 2 {
			return bridge.SessionCommandResult{}, fmt.Errorf("/elevated takes one argument (accepted: %s)", strings.Join(elevatedModes, ", "))
		}
		mode := strings.ToLower(fields[1])
		switch mode {
		case "on", "ask", "full":
			if ss.saved == nil {
				saved := ss.overrides
				ss.saved = &saved
			}
			next := *ss.saved
			next.Host, next.Security = policy.HostGateway, policy.SecurityFull
			switch mode {
			case "ask":
				next.Ask = policy.AskAlways
			case "full":
				next.Ask = policy.AskOff
			}
			ss.overrides, ss.elevated = next, mode
			reply = fmt.Sprintf("elevated %s: %s (the gateway's own exec-approvals.json still applies)", mode, describe(next))
		case "off":
			if ss.saved != nil {
				ss.overrides = *ss.saved
			}
			ss.saved, ss.elevated = nil, ""
			reply = "elevated off: " + describe(ss.overrides)
		default:
			return bridge.SessionCommandResult{}, fmt.Errorf("%w: /elevated %q (accepted: %s)", policy.ErrInvalidValue, fields[1], strings.Join(elevatedModes, ", "))
		}
	default:
		return bridge.SessionCommandResult{}, fmt.Errorf("%w: %q", ErrUnknownCommand, fields[0])
	}
	return bridge.SessionCommandResult{Reply: reply, Settings: view(ss)}, nil
}

// Settings returns the session's current overrides as the wire shows them.
func (s *Store) Settings(k Key) bridge.SessionSettings {
	s.mu.Lock()
	defer s.mu.Unlock()
	return view(s.get(k))
}

func view(ss *Session) bridge.SessionSettings {
	o := ss.overrides
	return bridge.SessionSettings{Host: string(o.Host), Security: string(o.Security), Ask: string(o.Ask), Node: o.Node, Elevated: ss.elevated}
}

func apply(st *policy.Settings, field string) error {
	name, val, ok := strings.Cut(field, "=")
	if !ok || val == "" {
		return fmt.Errorf("%w: /exec argument %q (want key=value with key host, security, ask or node)", policy.ErrInvalidValue, field)
	}
	clear := strings.EqualFold(val, "default")
	switch strings.ToLower(name) {
	case "host":
		if clear {
			st.Host = ""
			return nil
		}
		h, err := policy.ParseHost(val)
		if err != nil {
			return err
		}
		st.Host = h
	case "security":
		if clear {
			st.Security = ""
			return nil
		}
		v, err := policy.ParseSecurity(val)
		if err != nil {
			return err
		}
		st.Security = v
	case "ask":
		if clear {
			st.Ask = ""
			return nil
		}
		v, err := policy.ParseAsk(val)
		if err != nil {
			return err
		}
		st.Ask = v
	case "node":
		if clear {
			st.Node = ""
			return nil
		}
		st.Node = val
	default:
		return fmt.Errorf("%w: /exec key %q (accepted: host, security, ask, node)", policy.ErrInvalidValue, name)
	}
	return nil
}

func describe(s policy.Settings) string {
	part := func(k, v string) string {
		if v == "" {
			v = "(default)"
		}
		return k + "=" + v
	}
	return strings.Join([]string{
		part("host", string(s.Host)), part("security", string(s.Security)),
		part("ask", string(s.Ask)), part("node", s.Node),
	}, " ")
}
