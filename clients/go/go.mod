module koinon/client

go 1.19
