// Brain
