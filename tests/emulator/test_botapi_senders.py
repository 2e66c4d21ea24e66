"""Updates without a person behind them, edits, stickers and test-built updates, as python-telegram-bot reads them."""

import io

import pytest
import telegram
from PIL import Image
from telegram import Chat, Message, Update, User
from telegram.error import BadRequest

pytestmark = pytest.mark.timeout(30)

USER = 42


@pytest.fixture
async def tg(botapi, botapi_bot):
    async with telegram.Bot(botapi_bot.token, base_url=botapi.base_url, base_file_url=botapi.base_file_url) as bot:
        yield bot


async def test_channel_post_has_no_sender_and_the_bot_can_post_there(botapi_bot, tg):
    botapi_bot.inject_channel_post(-1001234, "/demo hi", title="News")
    (update,) = await tg.get_updates()
    post = update.channel_post
    assert update.effective_user is None and post.from_user is None
    assert (post.chat.type, post.chat.title, post.sender_chat.id) == (Chat.CHANNEL, "News", -1001234)
    assert post.entities[0].type == "bot_command"
    sent = await tg.send_message(-1001234, "noted")
    assert sent.chat.id == -1001234


async def test_anonymous_admin_writes_as_group_anonymous_bot(botapi_bot, tg):
    botapi_bot.inject_anonymous_admin_text(-1005678, "/demo hi")
    (update,) = await tg.get_updates()
    message = update.message
    assert (message.from_user.id, message.from_user.username) == (1087968824, "GroupAnonymousBot")
    assert message.sender_chat.id == message.chat.id == -1005678 and message.chat.type == Chat.SUPERGROUP
    reply = await message.reply_text("please post as yourself")  # quotes, as PTB does in groups
    assert reply.reply_to_message.message_id == message.message_id
    with pytest.raises(ValueError):
        botapi_bot.inject_anonymous_admin_text(5678, "a group id is negative")


async def test_group_members_reach_the_bot_as_privacy_mode_lets_them(botapi, botapi_bot, tg):
    """Commands for no bot or this one, and replies to the bot, come in; other text and other bots' commands not."""
    group, other = -1001234567890, 43
    botapi.add_user(other, "Bo")
    name = botapi_bot.user["username"]
    assert (await tg.get_me()).can_read_all_group_messages is False
    chatter = botapi_bot.inject_group_text(group, USER, "hello all")
    botapi_bot.inject_group_text(group, USER, "/demo@another_bot x")  # another bot's
    plain = botapi_bot.inject_group_text(group, USER, "/demo a fox")
    addressed = botapi_bot.inject_group_text(group, other, f"/demo@{name} a cat", reply_to=chatter["message_id"])
    updates = await tg.get_updates()
    assert [u.message.message_id for u in updates] == [plain["message_id"], addressed["message_id"]]
    message = updates[1].message
    assert (message.chat.id, message.chat.type, message.from_user.id, message.from_user.first_name) == (
        group, Chat.SUPERGROUP, other, "Bo")
    assert message.reply_to_message.message_id == chatter["message_id"] and message.sender_chat is None
    sent = await message.reply_text("queued")  # PTB quotes in groups
    assert sent.reply_to_message.from_user.id == other

    offset = updates[-1].update_id + 1
    to_bot = botapi_bot.inject_group_text(group, USER, "nice", reply_to=sent.message_id)
    botapi_bot.inject_group_photo(group, USER, png(), caption="look")  # no command: not for the bot
    edit = botapi_bot.inject_group_photo(group, USER, png(), caption="/demoedit")
    (first, second) = await tg.get_updates(offset=offset)
    assert (first.message.message_id, second.message.message_id) == (to_bot["message_id"], edit["message_id"])
    assert second.message.photo and second.message.caption == "/demoedit"
    assert len(botapi_bot.history(group)) == 8  # the group sees everything
    basic = botapi_bot.inject_group_text(-4242, USER, "/status", kind="group")
    assert basic["chat"]["type"] == "group"
    with pytest.raises(ValueError):
        botapi_bot.inject_group_text(-4242, USER, "/status", kind="channel")
    with pytest.raises(LookupError):
        botapi_bot.inject_group_text(group, USER, "/status", reply_to=9999)


def png() -> bytes:
    data = io.BytesIO()
    Image.new("RGB", (32, 24), (10, 200, 10)).save(data, "PNG")
    return data.getvalue()


async def test_edit_is_an_edited_message_update_unless_the_bot_did_not_subscribe(botapi_bot, tg):
    sent = botapi_bot.inject_text(USER, "/demo cat")
    botapi_bot.inject_edit(USER, sent["message_id"], "/demo dog")
    first, edit = await tg.get_updates()
    assert edit.edited_message.text == "/demo dog" and edit.edited_message.edit_date is not None
    assert edit.edited_message.message_id == first.message.message_id
    assert botapi_bot.history(USER)[0]["text"] == "/demo dog"

    await tg.get_updates(offset=edit.update_id + 1, allowed_updates=["message"])
    botapi_bot.inject_edit(USER, sent["message_id"], "/demo bird")
    assert await tg.get_updates(offset=edit.update_id + 1) == ()


async def test_sticker_is_a_downloadable_sticker(botapi_bot, tg):
    data = io.BytesIO()
    Image.new("RGBA", (512, 320), (0, 0, 0, 0)).save(data, "WEBP")
    botapi_bot.inject_sticker(USER, data.getvalue(), emoji="😀")
    (update,) = await tg.get_updates()
    sticker = update.message.sticker
    assert (sticker.width, sticker.height, sticker.emoji, sticker.type) == (512, 320, "😀", "regular")
    assert update.message.effective_attachment == sticker
    assert bytes(await (await tg.get_file(sticker.file_id)).download_as_bytearray()) == data.getvalue()


async def test_injected_update_makes_its_chat_and_message_known(botapi_bot, tg):
    chat = Chat(-100999, Chat.SUPERGROUP, title="Built")
    message = Message(7, telegram.constants.ZERO_DATE, chat, from_user=User(5, "Eve", False), text="hi")
    with pytest.raises(BadRequest, match="Chat not found"):
        await tg.send_message(-100999, "before")
    queued = botapi_bot.inject_update(Update(0, message=message).to_dict())
    (update,) = await tg.get_updates()
    assert update.update_id == queued["update_id"] and update.message.text == "hi"
    reply = await tg.send_message(-100999, "after", reply_to_message_id=7)
    assert (reply.reply_to_message.message_id, reply.message_id) == (7, 8)


async def test_injected_update_never_takes_the_id_of_a_message_the_bot_sent(botapi_bot, tg):
    """Telegram numbers a chat's messages: a test-built one with the id of the bot's message (the
    property test's ids are drawn at random) gets a fresh id, and the bot's message stays editable."""
    chat = Chat(-100998, Chat.SUPERGROUP, title="Built")
    eve = User(5, "Eve", False)
    botapi_bot.inject_update(Update(0, message=Message(7, telegram.constants.ZERO_DATE, chat, from_user=eve,
                                                       text="/demo")).to_dict())
    ours = await tg.send_message(-100998, "Queued /demo", reply_to_message_id=7)
    queued = botapi_bot.inject_update(Update(0, message=Message(ours.message_id, telegram.constants.ZERO_DATE, chat,
                                                                from_user=eve, text="/demo again")).to_dict())
    assert queued["message"]["message_id"] == ours.message_id + 1
    edited = await tg.edit_message_text("Queued /demo, /demo", chat_id=-100998, message_id=ours.message_id)
    assert edited.text == "Queued /demo, /demo"
    updates = await tg.get_updates()
    assert [u.message.text for u in updates] == ["/demo", "/demo again"]
    assert updates[1].message.message_id == ours.message_id + 1
