// SystemCalls
