# Convenience targets; the README's commands are the source of truth.
.PHONY: test build bench
test:
	./scripts/test.sh
build:
	CGO_ENABLED=0 go build -trimpath -o bin/exechost ./cmd/exechost
bench:
	go run ./bench
