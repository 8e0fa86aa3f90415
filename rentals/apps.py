from django.apps import AppConfig


class RentalsConfig(AppConfig):
    name = "rentals"
    verbose_name = "Rentals"

    def ready(self):
        from rentals import receivers

        receivers.connect()
